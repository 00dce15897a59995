"""Answers shaped for an agent: front matter, filters, pins, the per-hit cut, duplicate collapse.

Through the library (find_skills), the CLI, HTTP and the MCP server driven by the SDK client.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import urllib.error
import urllib.request

import pytest
from fakes import HashEncoder
from skill_files import write_skill

from skillsight_fast import SkillIndex
from skillsight_fast.agents.find import find_skills, name_key, source_matches
from skillsight_fast.agents.http import make_http_server
from skillsight_fast.agents.service import SkillService
from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.errors import QueryError, SkillsightError
from skillsight_fast.library.skills import load_skills

PDF_BODY = "Use pypdf to merge pages, split documents and extract tables from pdf files."


def _front(name, description, extra="", body="body\n"):
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}"


def _libraries(tmp_path):
    """Two collections; both hold a 'pdf' skill (the same skill copied), one holds tagged skills."""
    a, b = tmp_path / "team-a" / "skills", tmp_path / "team-b" / "skills"
    write_skill(a, "pdf", raw=_front("pdf", "Merge and split PDF files.", "tags: [documents, pdf]\n", PDF_BODY))
    write_skill(b, "pdf-tools", raw=_front("PDF", "Merge and split PDF files.", "", PDF_BODY))
    write_skill(a, "csv", raw=_front("csv", "Clean CSV files.", "metadata:\n  tags: [data]\ncategory: tables\n",
                                     "csv columns rows dedupe spreadsheet."))
    write_skill(a, "mesh", raw=_front("mesh", "Analyse STL meshes.",
                                      "when_to_use: When a 3D printing file needs checking.\n"
                                      "triggers: [stl volume]\nexamples:\n  - compute the volume of a part\n"
                                      "risk: low\nauthor: someone\n", "stl mesh connected components mass."))
    write_skill(b, "docker", raw=_front("docker", "Build Docker images.", "tags: devops, containers\n",
                                        "docker build compose deploy containers."))
    write_skill(b, "style", raw=_front("house-style", "The team's writing conventions.", "",
                                       "Use short sentences and active voice."))
    return a, b


@pytest.fixture
def index(tmp_path):
    a, b = _libraries(tmp_path)
    report = load_skills([a, b])
    idx = SkillIndex.build(report.skills, HashEncoder())
    idx.state.roots = report.roots
    return idx


def test_front_matter_fields_are_read_and_indexed(tmp_path):
    a, b = _libraries(tmp_path)
    skills = {s.id: s for s in load_skills([a, b]).skills}
    assert skills["pdf"].tags == ("documents", "pdf")
    assert skills["csv"].tags == ("data", "tables")  # metadata.tags and category
    assert skills["docker"].tags == ("devops", "containers")  # a comma-separated string
    mesh = skills["mesh"]
    assert mesh.when_to_use == "When a 3D printing file needs checking."
    assert mesh.triggers == ("stl volume",) and mesh.examples == ("compute the volume of a part",)
    # the extra fields are in the indexed text, between description and body; unknown keys are not
    assert mesh.text.split("\n")[:4] == ["mesh", "Analyse STL meshes.", "When a 3D printing file needs checking.",
                                         "stl volume"]
    assert "someone" not in mesh.text and "risk" not in mesh.text
    # a skill without the fields keeps exactly the old text (and content hash)
    style = skills["style"]
    assert style.text == "house-style\nThe team's writing conventions.\nUse short sentences and active voice."


def test_jsonl_records_carry_the_fields(tmp_path):
    path = tmp_path / "lib.jsonl"
    path.write_text(json.dumps({"id": "r1", "name": "r1", "description": "d", "tags": ["x", "y"],
                                "when_to_use": "w", "triggers": "t one", "extra": 1}) + "\n")
    (s,) = load_skills([path]).skills
    assert (s.tags, s.when_to_use, s.triggers) == (("x", "y"), "w", ("t one",))
    path.write_text(json.dumps({"id": "r1", "name": "r1", "tags": {"no": 1}}) + "\n"
                    + json.dumps({"id": "r2", "name": "r2"}) + "\n")
    report = load_skills([path])
    assert [s.id for s in report.skills] == ["r2"] and "'tags' must be a list" in str(report.problems[0])


def test_tags_survive_save_and_load(index, tmp_path):
    index.pins = ["style"]
    index.save(tmp_path / "idx")
    back = SkillIndex.load(tmp_path / "idx", encoder=HashEncoder())
    assert {m.id: m.tags for m in back.skills}["pdf"] == ("documents", "pdf")
    assert {m.id: m.when_to_use for m in back.skills}["mesh"].startswith("When a 3D")
    assert back.pins == ["style"]
    with pytest.raises(SkillsightError, match="unknown skill"):
        back.pins = ["nope"]


def test_same_skill_from_two_collections_is_one_hit(index):
    (answer,) = find_skills(index, "merge pdf pages", k=3)
    ids = [h.id for h in answer.hits]
    assert ids[0] in ("pdf", "pdf-tools") and len(ids) == 3
    assert not {"pdf", "pdf-tools"} <= set(ids)
    assert answer.hits[0].copies == [({"pdf", "pdf-tools"} - {ids[0]}).pop()]
    (raw,) = find_skills(index, "merge pdf pages", k=3, collapse=False)
    assert {"pdf", "pdf-tools"} <= {h.id for h in raw.hits} and not raw.hits[0].copies
    assert name_key("PDF_Tools") == name_key("pdf tools") != name_key("pdf")


def test_near_identical_texts_under_other_names_collapse():
    from skillsight_fast.library.skills import Skill

    text = ("Merge and split PDF files.", " ".join([PDF_BODY] * 6))
    # enough other skills for the library's own nearest-neighbour distribution to single the pair out
    others = [Skill(f"o/{w}", w, f"Work with {w} files.", f"{w} {w} tools and {w} formats.")
              for w in ("csv", "yaml", "docker", "regex", "email", "sql")]
    skills = [Skill("a/merge", "merger", *text), Skill("b/combine", "combiner", *text), *others]
    index = SkillIndex.build(skills, HashEncoder())
    assert index.state.abstention["duplicate_cosine"] is not None
    (answer,) = find_skills(index, "merge pdf pages", k=3, abstention=None)
    assert len(answer.hits) == 3 and answer.hits[1].id.startswith("o/")
    assert {answer.hits[0].id, *answer.hits[0].copies} == {"a/merge", "b/combine"}


def test_tag_and_source_filters(index, tmp_path):
    # the filters alone (no threshold): a filtered search still finds the k best of what passes
    (answer,) = find_skills(index, "merge pdf pages", k=5, abstention=None, tags=["DEVOPS"])
    assert [h.id for h in answer.hits] == ["docker"]  # the only skill with the tag, however bad a fit
    (answer,) = find_skills(index, "merge pdf pages", k=5, abstention=None, tags=["documents", "pdf"])
    assert [h.id for h in answer.hits] == ["pdf"] and answer.hits[0].tags == ["documents", "pdf"]
    (answer,) = find_skills(index, "merge pdf pages", k=5, abstention=None, source="team-b/skills")
    assert {h.id for h in answer.hits} == {"pdf-tools", "docker", "style"}
    assert answer.hits[0].id == "pdf-tools" and answer.hits[0].copies == []  # its copy is filtered out
    (answer,) = find_skills(index, "merge pdf pages", k=5, abstention=None, source=str(tmp_path / "team-a"))
    assert {h.id for h in answer.hits} == {"pdf", "csv", "mesh"}
    assert find_skills(index, "merge pdf pages", k=5, abstention=None, tags=["nothing-has-this"])[0].hits == []
    for bad in ({"tags": [""]}, {"tags": [3]}, {"source": ""}, {"cut": "half"}):
        with pytest.raises(QueryError):
            find_skills(index, "pdf", **bad)


def test_source_matches_folders_and_id_prefixes():
    class M:
        id, path = "team:pdf", "/home/u/team-a/skills/pdf/SKILL.md"

    assert source_matches(M, "team") and source_matches(M, "skills") and source_matches(M, "/home/u/team-a")
    assert not source_matches(M, "/home/u/team") and not source_matches(M, "eam-a")


def test_pins_come_first_whatever_the_task(index):
    index.pins = ["style"]
    (answer,) = find_skills(index, "merge pdf pages", k=2)
    assert next(h.id for h in answer.hits) == "style" and answer.hits[0].pinned
    assert len(answer.hits) == 3 and not any(h.pinned for h in answer.hits[1:])
    # an abstaining task still gets its pins, and a filter can leave a pin out
    index_rule = Abstention("score", 1e9)
    (answer,) = find_skills(index, "merge pdf pages", k=2, abstention=index_rule)
    assert answer.abstained and [h.id for h in answer.hits] == ["style"]
    assert "style" not in {h.id for h in find_skills(index, "merge pdf pages", tags=["pdf"])[0].hits}
    assert [h.id for h in find_skills(index, "merge pdf pages", k=1, pins=[])[0].hits] != ["style"]


def test_per_hit_cut_varies_k_with_the_task(index):
    (full,) = find_skills(index, "merge pdf pages", k=5)
    cosines = [h.cosine for h in full.hits]
    threshold = (cosines[0] + cosines[1]) / 2  # only the first hit is above it
    rule = Abstention("cosine", threshold)
    (task_cut,) = find_skills(index, "merge pdf pages", k=5, abstention=rule)
    (hit_cut,) = find_skills(index, "merge pdf pages", k=5, abstention=rule, cut="hit")
    assert len(task_cut.hits) == 5 and [h.id for h in hit_cut.hits] == [full.hits[0].id]
    assert all(h.cosine >= threshold for h in hit_cut.hits)
    (none,) = find_skills(index, "merge pdf pages", k=5, abstention=Abstention("cosine", 2.0), cut="hit")
    assert none.hits == [] and none.abstained


# ---------------------------------------------------------------------- CLI, HTTP


def test_cli_search_pin_and_filters(index, tmp_path, capsys, monkeypatch):
    from skillsight_fast.cli import main

    index.save(tmp_path / "idx")
    real = SkillIndex.load.__func__  # the CLI loads with the index's model: give it the hash encoder

    def load(cls, directory, **kw):
        return real(cls, directory, **{"encoder": HashEncoder(), **kw})

    monkeypatch.setattr(SkillIndex, "load", classmethod(load))
    idx = str(tmp_path / "idx")
    assert main(["pin", "-i", idx, "style"]) == 0
    assert "pinned: style" in capsys.readouterr().out
    assert main(["search", "merge pdf pages", "-i", idx, "--json", "-k", "2", "--min-score", "none"]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert hits[0]["id"] == "style" and hits[0]["pinned"] and hits[1]["copies"]
    assert main(["-c", "no-pins=true", "search", "merge pdf pages", "-i", idx, "--json", "--tag", "devops",
                 "--min-score", "none"]) == 0
    assert [h["id"] for h in json.loads(capsys.readouterr().out)["hits"]] == ["docker"]
    assert main(["-c", "no-collapse=true", "search", "merge pdf pages", "-i", idx, "--source", "team-b",
                 "--min-score", "none"]) == 0
    out = capsys.readouterr().out
    assert "(pinned)" in out and "[pdf-tools]" in out and "[csv]" not in out
    assert main(["pin", "-i", idx, "missing"]) == 1
    assert "unknown skill id" in capsys.readouterr().err
    assert main(["pin", "-i", idx, "--clear"]) == 0
    assert "pinned: (none)" in capsys.readouterr().out


def test_http_search_takes_filters_cut_and_collapse(index, tmp_path):
    index.pins = ["style"]
    index.save(tmp_path / "idx")
    service = SkillService(tmp_path / "idx", index=SkillIndex.load(tmp_path / "idx", encoder=HashEncoder()))
    server = make_http_server(service, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()

    def post(payload):
        req = urllib.request.Request(server.url + "/search", data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    try:
        status, out = post({"task": "merge pdf pages", "k": 2})
        assert status == 200 and out["hits"][0]["id"] == "style" and out["hits"][0]["pinned"]
        assert out["hits"][1]["copies"] and out["hits"][1]["uri"].startswith("skill://")
        status, out = post({"task": "merge pdf pages", "k": 3, "tags": ["devops"]})
        assert status == 200 and [h["id"] for h in out["hits"]] == ["docker"]
        status, out = post({"task": "merge pdf pages", "k": 5, "source": "team-a", "collapse": False})
        assert status == 200 and {h["id"] for h in out["hits"]} == {"pdf", "csv", "mesh"}
        for bad in ({"task": "pdf", "cut": "x"}, {"task": "pdf", "tags": {"a": 1}}, {"task": "pdf", "collapse": "no"}):
            status, out = post(bad)
            assert status == 400 and out["error"]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# ---------------------------------------------------------------------- MCP over a real stdio session


@pytest.mark.model
def test_mcp_find_skills_filters_pins_and_copies(tmp_path):
    """A real `skillsight serve --mcp` process (real default model), driven by the SDK's own client."""
    mcp = pytest.importorskip("mcp")
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from skillsight_fast.cli import main

    a, b = _libraries(tmp_path)
    assert main(["index", str(a), str(b), "-o", str(tmp_path / "idx"), "-q", "--pin", "style"]) == 0

    async def calls():
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "skillsight_fast.cli", "-c", "min-score=none", "serve", "--mcp", "-i", str(tmp_path / "idx"), "-q"])
        async with stdio_client(params) as (read, write):
            async with mcp.ClientSession(read, write) as session:
                await session.initialize()
                tools = {t.name: t for t in (await session.list_tools()).tools}
                plain = await session.call_tool("find_skills", {"task": "merge two PDF files into one", "k": 2})
                tagged = await session.call_tool("find_skills", {"task": "merge two PDF files", "tags": ["devops"]})
                sourced = await session.call_tool("find_skills", {"task": "merge two PDF files", "k": 5,
                                                                  "source": "team-a", "collapse": False})
                bad = await session.call_tool("find_skills", {"task": "merge two PDF files", "cut": "half"})
                return tools, plain, tagged, sourced, bad

    tools, plain, tagged, sourced, bad = asyncio.run(asyncio.wait_for(calls(), 120))
    tool = tools["find_skills"]
    schema = getattr(tool, "input_schema", None) or tool.inputSchema
    schema = schema["properties"]
    assert {"task", "k", "tags", "source", "cut", "collapse"} <= set(schema)
    hits = json.loads(plain.content[0].text)["hits"]
    assert hits[0]["id"] == "style" and hits[0]["pinned"]
    assert hits[1]["id"] in ("pdf", "pdf-tools") and len(hits[1]["copies"]) == 1
    assert [h["id"] for h in json.loads(tagged.content[0].text)["hits"]] == ["docker"]  # the pin has no tag
    assert {h["id"] for h in json.loads(sourced.content[0].text)["hits"]} == {"pdf", "csv", "mesh"}
    assert bool(getattr(bad, "is_error", getattr(bad, "isError", False))) and "cut" in bad.content[0].text


def test_collapse_over_a_loaded_skill_table_answers_as_in_memory(tmp_path):
    """A loaded index reads only the ids, names and paths of the copies it folds (SkillTable.fields):
    the answers, copies and tools of two servers kept apart, are those of the in-memory index."""
    from skillsight_fast.engine.columns import SkillTable
    from skillsight_fast.library.skills import Skill
    from skillsight_fast.tools.catalog import Tool, tool_skill

    schema = {"type": "object", "properties": {"query": {"type": "string", "description": "Words to find"}}}
    tools = [tool_skill(Tool(server=s, name="search", description="Search the documents for words",
                             input_schema=schema)) for s in ("docs", "wiki")]
    copies = [Skill(id=f"c{i}/search", name="Search" if i % 2 else "search", body="x",
                    description="Search the documents for words", path=f"/s/c{i}/search/SKILL.md")
              for i in range(6)]
    skills = [*tools, *copies, Skill(id="tz", name="timezones", description="Convert time zones", body="y")]
    index = SkillIndex.build(skills, HashEncoder())
    index.save(tmp_path / "idx")
    loaded = SkillIndex.load(tmp_path / "idx", encoder=HashEncoder(), mmap=True)
    assert isinstance(loaded.skills, SkillTable)
    for task in ("search the documents for words", "convert time zones"):
        for pins in (None, ["c3/search"]):
            want = find_skills(index, [task], 5, pins=pins, abstention=None)[0]
            got = find_skills(loaded, [task], 5, pins=pins, abstention=None)[0]
            assert [(h.id, h.copies, h.pinned) for h in got.hits] == [(h.id, h.copies, h.pinned) for h in want.hits]
    hits = find_skills(loaded, ["search the documents for words"], 5, abstention=None)[0].hits
    assert {h.id for h in hits} | {c for h in hits for c in h.copies} == {s.id for s in skills}
    assert sum(len(h.copies) for h in hits) >= 5


def test_unfiltered_searches_follow_new_flags_and_check_empty_filters(index):
    """The unfiltered allowed-rows mask is cached per index state; setting new flags replaces it."""
    first = find_skills(index, "merge pdf pages", k=3, abstention=None)[0].hits[0].id
    index.state.flags = [["injection"] if m.id == first else [] for m in index.skills]
    assert first not in {h.id for h in find_skills(index, "merge pdf pages", k=3, abstention=None)[0].hits}
    again = find_skills(index, "merge pdf pages", k=3, abstention=None, allow_flagged=True)[0].hits
    assert first in {h.id for h in again} | {c for h in again for c in h.copies}
    index.state.flags = [[] for _ in index.skills]
    assert find_skills(index, "merge pdf pages", k=3, abstention=None)[0].hits[0].id == first
    with pytest.raises(QueryError):
        find_skills(index, "merge pdf pages", k=3, tags="")
