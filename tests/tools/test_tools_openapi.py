"""OpenAPI 3 operations as tools, on the real example specs of the OpenAPI Initiative (data/openapi)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import HashEncoder

SPECS = Path(__file__).resolve().parents[2] / "data" / "openapi"


def test_operations_become_tools_with_resolved_schemas():
    from skillsight_fast.tools.openapi import read_openapi

    tools = {t.name: t for t in read_openapi(SPECS / "petstore-expanded.yaml")}
    assert set(tools) == {"findPets", "addPet", "find_pet_by_id", "deletePet"}
    assert {t.server for t in tools.values()} == {"petstore-expanded"}
    add = tools["addPet"]
    assert add.description.endswith("HTTP: POST /pets")
    body = add.input_schema["properties"]["body"]  # #/components/schemas/NewPet, resolved
    assert body["required"] == ["name"] and body["x-in"] == "body"
    assert add.input_schema["required"] == ["body"]
    find = tools["findPets"].input_schema
    assert find["properties"]["limit"]["type"] == "integer" and find["properties"]["tags"]["x-in"] == "query"
    assert "required" not in find
    assert tools["deletePet"].input_schema["required"] == ["id"]  # path parameters are always required
    # path-item parameters ($ref'd in link-example) reach every operation of the path
    link = {t.name: t for t in read_openapi(SPECS / "link-example.yaml", "bitbucket")}
    assert link["mergePullRequest"].id == "bitbucket/mergePullRequest"
    assert {"username", "slug", "pid"} <= set(link["mergePullRequest"].input_schema["properties"])


def test_recursive_and_bad_specs(tmp_path):
    from skillsight_fast.errors import SkillFormatError
    from skillsight_fast.tools.openapi import openapi_tools, read_openapi

    spec = {"openapi": "3.0.3", "paths": {"/nodes": {"post": {"requestBody": {"content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}}}},
        "components": {"schemas": {"Node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}}}
    (tool,) = openapi_tools(spec, "tree")
    assert tool.name == "post_nodes"
    children = tool.input_schema["properties"]["body"]["properties"]["children"]
    assert children["items"]["description"] == "(recursive: Node)"
    (tmp_path / "s.json").write_text(json.dumps(spec))
    assert read_openapi(tmp_path / "s.json")[0].id == "s/post_nodes"
    for text, message in [("swagger: '2.0'\npaths: {}\n", "Swagger 2.0"), ("openapi: 3.0.0\n", "no 'paths'"),
                          ("openapi: 3.0.0\npaths: {}\n", "no operation"), ("{not json", "invalid JSON"),
                          ("a: [b\n", "invalid YAML")]:
        (tmp_path / "bad.yaml").write_text(text)
        with pytest.raises(SkillFormatError, match=message):
            read_openapi(tmp_path / "bad.yaml")
    with pytest.raises(SkillFormatError, match="cannot read"):
        read_openapi(tmp_path / "missing.yaml")


def test_index_cli_with_openapi_finds_an_operation(tmp_path, monkeypatch, capsys):
    from skillsight_fast import SkillIndex, models
    from skillsight_fast.agents.find import find_skills
    from skillsight_fast.cli import main

    monkeypatch.setattr(models, "load_encoder", lambda *a, **k: HashEncoder())
    out = tmp_path / "idx"
    assert main(["index", "--openapi", str(SPECS / "petstore-expanded.yaml"),
                 "--openapi", f"patents={SPECS / 'uspto.yaml'}", "-o", str(out), "-q"]) == 0
    index = SkillIndex.load(out, encoder=HashEncoder())
    assert len(index) == 7 and "patents/perform-search" in index.ids
    # a catalogue of tools only: the BM25 side scores every task token, recorded in the manifest
    assert index.decisions.lexical_evidence == "all"
    hits = find_skills(index, ["delete a pet by its id"], k=3)[0].hits
    assert hits[0].id == "petstore-expanded/deletePet"
    assert main(["index", "--openapi", str(tmp_path / "nope.yaml"), "-o", str(out), "-q"]) == 1
    assert "cannot read" in capsys.readouterr().err
