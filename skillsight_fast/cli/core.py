"""Core subcommands: index, search, info, warmup."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from skillsight_fast.cli._common import add_abstention_args, emit_json
from skillsight_fast.cli.settings import settle
from skillsight_fast.config import (
    DEFAULT_MODEL,
    ENGINES,
    LEXICAL_SIDES,
    MAPPED_TIERS,
    QUERY_ENCODER_CHOICES,
    QUERY_ENCODERS,
    SCAN_CHOICES,
    ScanConfig,
    default_continuation,
)
from skillsight_fast.errors import SkillsightError


def _safe(text: str) -> str:
    """Control characters (an ESC sequence in a skill's name) as escapes: never sent raw to the terminal."""
    return "".join(c if c.isprintable() or c == " " else f"\\u{ord(c):04x}" for c in text)


def register(sub: argparse._SubParsersAction) -> None:
    """Add index, search, info and warmup."""
    for add in (_add_index, _add_search, _add_info, _add_rescan, _add_warmup, _add_split):
        add(sub)


def _add_index(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="index skill libraries (SKILL.md trees, .jsonl files, dataset folders)")
    p.add_argument("sources", nargs="*", metavar="SOURCE")
    p.add_argument("--mcp", action="append", default=[], metavar="'[NAME=]COMMAND ARGS...'",
                   help="index the tools of an MCP server: a stdio command line or a streamable-HTTP URL, "
                        "ids NAME/tool (repeatable)")
    p.add_argument("--openapi", action="append", default=[], metavar="[NAME=]FILE",
                   help="index each operation of an OpenAPI 3 file (JSON or YAML) as a tool NAME/operation "
                        "(NAME defaults to the file name; repeatable)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="index folder to write")
    p.add_argument("--model", default=DEFAULT_MODEL, help="encoder name, model folder or .onnx file")
    p.add_argument("--int8", action="store_true", help="use the int8-quantised encoder")
    p.add_argument("--strict", action="store_true", help="fail on the first broken skill instead of skipping it")
    p.add_argument("--paper", action="store_true",
                   help="the method exactly as the paper writes it (no adaptive rules: SBC always, LEC, weight 1)")
    p.add_argument("--lexical", choices=LEXICAL_SIDES, default=None,
                   help="lexical side fused with the dense score (default: bm25, or lec with --paper)")
    add_query_encoder_args(p)
    add_scan_args(p)
    p.add_argument("--pin", action="append", default=[], metavar="ID",
                   help="a skill every search returns first (repeatable; see also 'skillsight pin')")
    p.add_argument("--stream", action="store_true",
                   help="read, analyse and encode the sources in chunks, embeddings in a memory-mapped "
                        "file (memory grows with the outputs, not the texts; docs/BUILD.md)")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="encode the chunks on Ray workers (needs the ray extra): no ADDRESS starts "
                        "Ray on this machine, 'auto' joins the running cluster, or HOST:PORT / ray://HOST:PORT")
    p.add_argument("--ray-workers", type=_positive, default=None, metavar="N",
                   help="Ray workers, one CPU each (default: the cluster's CPUs)")
    p.add_argument("--chunk-size", type=_positive, default=None, metavar="N",
                   help="skills per chunk of --stream / --ray (default 4096)")
    p.add_argument("--shards", type=_positive, default=None, metavar="N",
                   help="also write N shard folders in OUTPUT.shards for serve --ray (with --ray each one "
                        "is written on a Ray worker from the rows in the object store; else split after "
                        "the build, as 'skillsight split')")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or warnings")
    p.set_defaults(func=cmd_index)
    settle(p, "index", ["--int8", "--paper", "--lexical", "--query-encoder", "--query-model", "--query-int8",
                        "--stream", "--ray", "--ray-workers", "--chunk-size", "--shards"])


def add_query_encoder_args(p: argparse.ArgumentParser, evaluation: bool = False) -> None:
    """``--query-encoder``, ``--query-model`` and ``--query-int8`` (``index`` and ``eval``)."""
    if not evaluation:
        p.add_argument("--query-encoder", choices=QUERY_ENCODER_CHOICES, default="auto",
                       help="how tasks are encoded: auto (default) = the lookup-first cascade (the fitted "
                            "table answers a long task when its search is sure, the int8 transformer "
                            "answers the rest; an in-memory build) or the transformer (--stream, --ray, "
                            "--paper, --int8); or one tier: transformer, static-mapped, contextual, fitted, "
                            "static; accuracy and speed in docs/ENCODERS.md")
        p.add_argument("--fallback-below", type=float, default=None, metavar="SCORE",
                       help="cascade: a task whose lookup search's best fused score is below SCORE goes to "
                            "the transformer (default 0.45 with auto; with --query-encoder static-mapped, "
                            "contextual or fitted it turns the cascade on)")
        p.add_argument("--lookup-min-pieces", type=int, default=None, metavar="N",
                       help="cascade: tasks of fewer than N word pieces go to the transformer directly "
                            "(default 64 with auto, 0 otherwise)")
    else:
        p.add_argument("--query-encoder", choices=QUERY_ENCODERS, default="transformer",
                       help="how tasks are encoded: the transformer (default), static-mapped (a static table "
                            "lookup mapped into the transformer's space; skills still transformer-encoded), "
                            "contextual (a lookup in a table of the transformer's token states averaged over "
                            "the library's texts, made at build by one more pass), fitted (that table fitted "
                            "to the transformer on the library's own texts at build) or static (skills and "
                            "tasks static); accuracy and speed in docs/ENCODERS.md")
    p.add_argument("--query-model", metavar="DIR", default=None,
                   help="model2vec folder of the static tiers (default: distilled from --model once, "
                        "into the cache)")
    if evaluation:
        int8_help = ("task vectors of every dense method from the int8-quantised transformer (--query-int8) or "
                     "the float32 one (--no-query-int8); default: each skillsight configuration as an index "
                     "of it searches (int8 tasks for the default, float32 for --paper), baselines float32")
    else:
        int8_help = ("encode the tasks with the dynamically int8-quantised transformer while the skills stay "
                     "float32 (the default, except with --paper) or with the float32 one (--no-query-int8); "
                     "transformer tier only; docs/ENCODERS.md")
    p.add_argument("--query-int8", action=argparse.BooleanOptionalAction, default=None, help=int8_help)


def add_scan_args(p: argparse.ArgumentParser, default: str | None = "auto") -> None:
    """``--scan`` and its parameters (``index`` and ``rescan``)."""
    p.add_argument("--scan", choices=SCAN_CHOICES, default=default,
                   help="dense candidate scan: exact float32, int8 matrix + exact re-scoring, binary (1-bit "
                        "sign codes by Hamming distance in front of int8), faiss ivf "
                        "(needs the large extra: faiss), or auto by library size (exact below 200k skills, "
                        "binary from 200k, ivf from 2M; docs/LARGE.md)" + (" (default auto)" if default else ""))
    from skillsight_fast.engine.scan import SCAN_PARAMS

    for param in SCAN_PARAMS.values():  # each scan type declares its parameters (engine/scan.py)
        p.add_argument(f"--{param.name}", type=_positive, default=None, metavar=param.metavar,
                       help=f"{param.help} (default {param.default})")


def scan_params(args: argparse.Namespace) -> dict:
    """The scan parameters given on the command line (``ScanConfig.params``: name → value)."""
    from skillsight_fast.engine.scan import SCAN_PARAMS

    return {name: getattr(args, name) for name in SCAN_PARAMS if getattr(args, name, None) is not None}


def _positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return n


def _read_tools(args: argparse.Namespace) -> list:
    """The tools of ``--mcp`` servers and ``--openapi`` files, as skills."""
    tools: list = []
    if args.mcp:
        from skillsight_fast.tools.catalog import parse_server_arg
        from skillsight_fast.tools.mcp_source import read_mcp_tools

        tools = read_mcp_tools([parse_server_arg(a) for a in args.mcp])
    if args.openapi:
        from skillsight_fast.tools.catalog import tool_skill
        from skillsight_fast.tools.openapi import parse_openapi_arg, read_openapi

        for arg in args.openapi:
            name, spec = parse_openapi_arg(arg)
            tools += [tool_skill(t) for t in read_openapi(spec, name)]
    return tools


def cmd_index(args: argparse.Namespace) -> int:
    from skillsight_fast import IndexConfig
    from skillsight_fast.errors import SkillFormatError

    t0 = time.perf_counter()
    if not args.sources and not args.mcp and not args.openapi:
        raise SkillFormatError("nothing to index: give a SOURCE, --mcp or --openapi")
    from skillsight_fast.engine.io import check_index_target

    check_index_target(args.output)  # a bad output path fails now, not after the encoding
    streamed = args.stream or args.ray is not None
    if args.query_encoder in ("contextual", "fitted") and streamed:
        raise SkillFormatError(f"--query-encoder {args.query_encoder} is built in memory (its token table "
                               "needs a pass over every text): drop --stream / --ray")
    if args.chunk_size is not None and not (args.stream or args.ray is not None):
        raise SkillFormatError("--chunk-size is for --stream or --ray")
    if args.ray_workers is not None and args.ray is None:
        raise SkillFormatError("--ray-workers is for --ray")
    from skillsight_fast.config import FALLBACK_BELOW, LOOKUP_MIN_PIECES
    from skillsight_fast.engine.cascade import Cascade
    from skillsight_fast.engine.index import resolve_query_encoder

    if args.query_int8 and args.query_encoder not in ("transformer", "auto"):
        raise SkillFormatError(f"--query-int8 is for the transformer tier, not --query-encoder {args.query_encoder}")
    cascade_flags = {"fallback_below": args.fallback_below, "lookup_min_pieces": args.lookup_min_pieces}
    if any(v is not None for v in cascade_flags.values()) and args.query_encoder not in ("auto", *MAPPED_TIERS):
        raise SkillFormatError(f"--fallback-below / --lookup-min-pieces are for the cascade (--query-encoder auto, "
                               f"static-mapped, contextual or fitted), not --query-encoder {args.query_encoder}")
    if args.lookup_min_pieces is not None and args.lookup_min_pieces < 0:
        raise SkillFormatError(f"--lookup-min-pieces must be 0 or more, got {args.lookup_min_pieces}")
    if any(v is not None for v in cascade_flags.values()) and args.query_encoder == "auto" and (
            streamed or args.paper or args.int8 or args.query_int8 is not None):
        raise SkillFormatError("--fallback-below / --lookup-min-pieces set the cascade, which --stream and --ray "
                               "build with its defaults and --paper, --int8 and --query-int8 / --no-query-int8 do "
                               "not build (they build the transformer tier): drop one or the other")
    if args.query_int8 is False and args.int8:
        raise SkillFormatError("--no-query-int8 with --int8: an int8 index encodes its tasks with the int8 encoder")
    try:  # IndexConfig and Cascade check their own fields (e.g. --fallback-below's range)
        config = IndexConfig(model=args.model, int8=args.int8, adaptive=not args.paper, lexical=args.lexical,
                             scan=ScanConfig(args.scan, scan_params(args)), query_encoder=args.query_encoder,
                             query_model=args.query_model, query_int8=args.query_int8)
        cascade = None  # the build's default: auto settled into the lookup tier gets DEFAULT_CASCADE
        if args.query_encoder == "auto" and any(v is not None for v in cascade_flags.values()):
            cascade = Cascade(FALLBACK_BELOW if args.fallback_below is None else args.fallback_below,
                              args.lookup_min_pieces or LOOKUP_MIN_PIECES)
        elif any(v is not None for v in cascade_flags.values()):
            cascade = Cascade(args.fallback_below, args.lookup_min_pieces or 0)
    except ValueError as exc:
        raise SkillFormatError(f"bad index settings: {exc}") from None
    from skillsight_fast.tools.kind import is_tool_catalogue

    if (not args.sources or is_tool_catalogue(args.sources)) and args.lexical in (None, "bm25") and not args.paper:
        from skillsight_fast.tools.catalog import tool_index_config

        # a catalogue of tools only: --mcp / --openapi, tool JSONL files, dataset folders of kind tools/apis
        config = tool_index_config(config)
    # auto stays unsettled: every build settles it with its encoder (a streamed or Ray build from the shards'
    # token sums, skillsight_fast.indexing.stream), so all give the same tier and cascade
    config = resolve_query_encoder(config)  # the static tiers' model folder (distilled once if needed)
    folders = None  # with ray, the shard folders the build's Ray tasks write
    if args.shards is not None and args.ray is not None:
        from skillsight_fast.cluster.build import ShardFolders
        from skillsight_fast.cluster.layout import shards_folder

        folders = ShardFolders(shards_folder(args.output), args.shards)
    if args.stream or args.ray is not None:
        index, report = _index_streaming(args, config, folders)
    else:
        index, report = _index_in_memory(args, config, cascade)
    if args.pin:
        known = set(index.ids)
        unknown = [p for p in args.pin if p not in known]
        if unknown:
            raise SkillFormatError(f"--pin: no skill has the id {unknown[0]!r}")
    index.state.roots = report.roots
    index.pins = args.pin
    index.save(args.output)
    layout = _write_shard_folders(args, folders)
    config = index.config  # what the build settled (auto: the cascade or the transformer)
    if config.encoder.query_int8 and not config.encoder.int8:
        index.encoders.query_encoder  # quantise the task encoder once now, not in the first search  # noqa: B018
    if index.cascade.on:
        index.encoders.fallback_encoder  # the cascade's int8 transformer, the same  # noqa: B018
    summary = {
        "output": str(args.output), "n_skills": len(index), "skipped": [str(p) for p in report.problems],
        "seconds": round(time.perf_counter() - t0, 2), **index.stats.to_dict(),
        "scan": index.scan.describe(), "query_encoder": config.encoder.query_encoder,
        "query_int8": bool(config.encoder.query_int8), "fallback_below": index.cascade.fallback_below,
        "lookup_min_pieces": index.cascade.lookup_min_pieces,
    }
    if layout is not None:
        summary["shards"] = {"folder": str(layout["folder"]), "shards": len(layout["shards"]),
                             "written_by": layout["written_by"]}
    if args.json:
        emit_json(summary)
    elif not args.quiet:
        print(f"indexed {plural(len(index), 'skill')} into {args.output} in {summary['seconds']} s"
              + (f" ({len(report.problems)} skipped: see above)" if report.problems else "")
              + f"; 'skillsight info -i {args.output}' describes it")
        if layout is not None:
            print(f"{len(layout['shards'])} shard folders in {layout['folder']} ({layout['written_by']}); "
                  f"'skillsight -c ray=ADDRESS serve --http -i {args.output}' serves them", file=sys.stderr)
    return 0


def _write_shard_folders(args: argparse.Namespace, folders) -> dict | None:
    """``-c shards=N``: the layout the Ray tasks wrote (``folders``), named after the saved index, or a
    split of it."""
    from skillsight_fast.cluster.layout import shards_folder, split_index

    if args.shards is None:
        return None
    if folders is not None:  # written by the Ray build's tasks: name the saved index in the layout
        layout, by = folders.commit(args.output), "Ray workers"
    else:
        layout, by = split_index(args.output, shards_folder(args.output), args.shards), "split after the build"
    return {**layout, "folder": shards_folder(args.output), "written_by": by}


def _index_in_memory(args: argparse.Namespace, config, cascade=None) -> tuple:
    from skillsight_fast import SkillIndex
    from skillsight_fast.errors import SkillFormatError
    from skillsight_fast.library.skills import LoadReport, load_skills
    from skillsight_fast.models import load_encoder
    from skillsight_fast.progress import ProgressEncoder

    report = load_skills(args.sources, strict=args.strict) if args.sources else LoadReport()
    tools = _read_tools(args)
    if tools:
        ids = {s.id for s in report.skills}
        clash = next((s.id for s in tools if s.id in ids), None)
        if clash is not None or len({s.id for s in tools}) != len(tools):
            raise SkillFormatError(f"duplicate tool id {clash or 'among the servers'}: name the servers with NAME=")
        report.skills.extend(tools)
    for problem in report.problems:
        if not args.quiet:
            print(f"skipped {problem}", file=sys.stderr)
    encoder = load_encoder(config.encoder.model, int8=args.int8)
    if not args.quiet:  # a bar on a terminal, a line every few seconds elsewhere
        encoder = ProgressEncoder(encoder, desc=f"encoding {len(report.skills)} skills")
    return SkillIndex.build(report.skills, encoder, config, cascade), report


def _index_streaming(args: argparse.Namespace, config, folders=None) -> tuple:
    """``--stream`` / ``--ray``: the sources as a stream of chunks (skillsight_fast.indexing); ``folders``:
    the Ray build's shard folders (:class:`skillsight_fast.cluster.build.ShardFolders`)."""
    import functools
    import itertools
    from pathlib import Path

    from skillsight_fast.errors import SkillFormatError
    from skillsight_fast.indexing import DEFAULT_CHUNK, stream_build
    from skillsight_fast.library.skills import LoadReport, iter_skills
    from skillsight_fast.models import load_encoder
    from skillsight_fast.progress import LINE_EVERY, progress_enabled

    report = LoadReport()
    tools = _read_tools(args)
    if len({s.id for s in tools}) != len(tools):
        raise SkillFormatError("duplicate tool id among the servers: name the servers with NAME=")
    skills = itertools.chain(iter_skills(args.sources, report, strict=args.strict) if args.sources else (),
                             tools)
    workdir = Path(args.output).expanduser().absolute().parent
    workdir.mkdir(parents=True, exist_ok=True)
    chunk = args.chunk_size or DEFAULT_CHUNK
    t0 = time.perf_counter()
    said = [t0]

    def progress(done: int) -> None:
        now = time.perf_counter()
        rate = done / max(now - t0, 1e-9)
        if progress_enabled(args.quiet):
            print(f"\rencoded {done} skills ({rate:.1f}/s)", end="", file=sys.stderr, flush=True)
        elif not args.quiet and now - said[0] >= LINE_EVERY:  # not a terminal: a line every few seconds
            said[0] = now
            print(f"encoded {done} skills in {now - t0:,.0f} s ({rate:.1f}/s)", file=sys.stderr, flush=True)

    if args.ray is not None:
        from skillsight_fast.indexing.ray import ray_build

        factory = functools.partial(load_encoder, config.encoder.model, int8=args.int8, threads=1)
        index = ray_build(skills, factory, config, address=None if args.ray == "local" else args.ray,
                          workers=args.ray_workers, chunk_size=chunk, workdir=workdir, on_chunk=progress,
                          query_encoder=load_encoder(config.encoder.model, int8=args.int8), write_folders=folders)
    else:
        index = stream_build(skills, load_encoder(config.encoder.model, int8=args.int8), config, chunk_size=chunk,
                             workdir=workdir, on_chunk=progress)
    if progress_enabled(args.quiet):
        print(file=sys.stderr)
    for problem in report.problems:
        if not args.quiet:
            print(f"skipped {problem}", file=sys.stderr)
    return index, report


def _add_search(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="find the skills for a task")
    p.add_argument("task", nargs="+", help="the task: its words, quoted or not, are one task; '-' reads one "
                                           "task per line from stdin (several tasks: one result each)")
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    p.add_argument("-k", type=int, default=5, help="number of hits (default 5)")
    p.add_argument("--json", action="store_true", help="one JSON object per task")
    p.add_argument("--explain", action="store_true", help="show score components and evidence tokens")
    p.add_argument("--mmap", action="store_true", help="memory-map the index instead of reading it")
    p.add_argument("--tag", action="append", default=None, metavar="TAG",
                   help="only skills with this tag (repeatable: all of them)")
    p.add_argument("--source", metavar="DIR", help="only skills from this folder (or id prefix)")
    p.add_argument("--cut", choices=("task", "hit"), default="task",
                   help="task: no hits when the best is below the threshold (default); hit: drop each hit below it")
    p.add_argument("--no-collapse", dest="collapse", action="store_false",
                   help="list copies of a skill (same name, near-identical text) as separate hits")
    p.add_argument("--no-pins", action="store_true", help="leave out the index's pinned skills")
    p.add_argument("--engine", choices=("auto", *ENGINES), default="auto",
                   help="what runs the stages after the encoder: the Numba kernels, or NumPy (same hits, no "
                        "Numba start-up); auto: NumPy for up to 16 tasks, else the kernels (default)")
    add_abstention_args(p)
    p.set_defaults(func=cmd_search)
    settle(p, "search", ["--mmap", "--cut", "--no-collapse", "--no-pins", "--engine", "--min-cosine"])


def cmd_search(args: argparse.Namespace) -> int:
    from skillsight_fast import SkillIndex
    from skillsight_fast._startup import without_scipy_probe
    from skillsight_fast.agents.find import find_skills
    from skillsight_fast.engine.abstention import resolve_abstention
    from skillsight_fast.engine.result import check_queries
    from skillsight_fast.kernels.twins import ONE_SHOT_MAX_QUERIES

    # validated and cleaned once (lone surrogates from undecodable argv bytes become U+FFFD, printable)
    args.task = check_queries(task_list(args.task))
    # --mmap reads only what the search touches: the checks that keep the kernels in bounds run, the
    # checksums and the finiteness of the float32 matrices do not (docs/GUARANTEES.md)
    with without_scipy_probe():  # a large index's checks start Numba (skillsight_fast.kernels.validation)
        index = SkillIndex.load(args.index, mmap=args.mmap, verify="lazy" if args.mmap else True)
    # a one-shot process: for a few tasks the NumPy stages cost less than Numba's start-up
    few = len(args.task) <= ONE_SHOT_MAX_QUERIES
    index.engine = args.engine if args.engine != "auto" else "numpy" if few else "numba"
    rule = resolve_abstention(args.index, args.min_score, args.min_cosine)
    with without_scipy_probe():  # a one-shot process: skip Numba's BLAS probe (see _startup.py)
        answers = find_skills(index, args.task, args.k, abstention=rule, tags=args.tag, source=args.source,
                              cut=args.cut, collapse=args.collapse, pins=[] if args.no_pins else None)
    for answer in answers:
        if args.json:  # what the servers return (agents/service.py), without the live index's version
            from skillsight_fast.agents.live import skill_uri

            out = answer.to_dict(digits=6)
            for hit in out["hits"]:
                hit["uri"] = skill_uri(hit["id"])
            emit_json(out)
            continue
        print(f"task: {answer.query}")
        for rank, h in enumerate(answer.hits, 1):
            mark = "  (pinned)" if h.pinned else ""
            print(f"{rank:>3}. {_safe(h.name)}  [{_safe(h.id)}]  score {h.score:.3f}{mark}")
            if h.copies:
                print(f"     copies: {', '.join(_safe(c) for c in h.copies)}")
            desc = _safe(h.description)
            print(f"     {desc[:117] + '...' if len(desc) > 120 else desc}")
            if args.explain:
                print(f"     dense {h.dense:.3f}  cosine {h.cosine:.3f}  lexical {h.lexical:.3f}  "
                      f"evidence: {', '.join(h.evidence) or '- (' + no_evidence_reason(index, answer.query) + ')'}")
        if not any(not h.pinned for h in answer.hits):
            print("  (no hits)" if rule is None else
                  f"  (no skill fits: the best hit's {rule.signal} is below {rule.threshold:.4f}; "
                  "--min-score none shows the hits anyway)")
            best = answer.best
            if args.explain and best is not None and rule is not None:
                value = best.cosine if rule.signal == "cosine" else best.score
                print(f"     best: {_safe(best.name)}  [{_safe(best.id)}]  {rule.signal} {value:.4f} < threshold "
                      f"{rule.threshold:.4f}  (cosine {best.cosine:.3f}, score {best.score:.3f})")
    return 0


def plural(n: int, noun: str) -> str:
    """``1 skill``, ``2 skills``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def task_list(words: list[str]) -> list[str]:
    """The tasks of ``search``'s positional words: all of them one task (``search -i IDX merge two PDF
    files`` is one task, not four), or ``-`` alone: one task per non-blank line of stdin."""
    if words != ["-"]:
        return [" ".join(words)]
    tasks = [line.strip() for line in sys.stdin.read().splitlines() if line.strip()]
    if not tasks:
        raise SkillsightError("no task on stdin: give one task per line after 'search -i DIR -'")
    return tasks


def no_evidence_reason(index: Any, task: str) -> str:
    """Why a hit of ``task`` has no evidence tokens, for ``search --explain``."""
    from skillsight_fast.engine.analyzer import unique_tokens
    from skillsight_fast.engine.lexicon import STOPWORDS

    cfg = index.config
    tokens = unique_tokens(task, cfg.analyzer.min_token_len, cfg.analyzer.max_token_len)
    ids = index.lexical.lexicon.term_ids
    stop = [t for t in tokens if t in STOPWORDS]
    known = [t for t in tokens if t in ids and t not in STOPWORDS]
    generic = [t for t in known if bool(index.lexical.generic[ids[t]])]
    unknown = [t for t in tokens if t not in ids and t not in STOPWORDS]
    parts = []
    if stop:
        parts.append(f"stop-words: {', '.join(stop[:6])}")
    if generic:
        parts.append(f"generic in this library: {', '.join(generic[:6])}")
    if unknown:
        parts.append(f"in no skill: {', '.join(unknown[:6])}")
    evidence = [t for t in known if t not in stop and t not in generic]
    if evidence:
        parts.append(f"distinctive but not in this skill: {', '.join(evidence[:6])}")
    return "; ".join(parts) or "the task has no word tokens"


def _add_info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="describe an index")
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_info)


def cmd_info(args: argparse.Namespace) -> int:
    from pathlib import Path

    from skillsight_fast.config import IndexConfig
    from skillsight_fast.engine.io import read_manifest

    m = read_manifest(Path(args.index))
    info = {"index": str(args.index), "format_version": m["format_version"],
            "package_version": m["package_version"], "n_skills": m["n_skills"], "model": m["model"],
            "decisions": m["decisions"], "stats": m["stats"], "config": m["config"], "scan": scan_info(m),
            "abstention": abstention_info(Path(args.index), m), "shards": shards_info(Path(args.index))}
    if args.json:
        emit_json(info)
        return 0
    s = info["stats"]
    print(f"index {args.index}: {m['n_skills']} skills, format v{m['format_version']}")
    print(f"model {m['model']['id']} (dim {m['model']['dim']}, sha256 {m['model']['checksum'][:12]})")
    tier = m["config"].get("query_encoder", "transformer")
    query = m["model"].get("query") or {}
    try:
        int8_tasks = bool(IndexConfig.from_dict(m["config"]).settled(can_fit=False).encoder.query_int8)
    except (TypeError, ValueError):
        int8_tasks = False
    if int8_tasks:
        from skillsight_fast.models.static import is_static_model_dir

        int8_tasks = not is_static_model_dir(str(m["config"].get("model", "")))
    print(f"query encoder {tier}" + (f": static model {query.get('id')} (sha256 {str(query.get('checksum'))[:12]}) "
                                     "mapped into the model's space" if query else "")
          + (" (tasks through its int8-quantised graph)" if int8_tasks else ""))
    cascade = m.get("cascade", m["config"])  # an index saved before the cascade section: the config's keys
    below = cascade.get("fallback_below") if isinstance(cascade, dict) else None
    if below is not None:
        least = cascade.get("lookup_min_pieces") or 0
        print(f"lookup-first cascade: the int8 transformer answers a task whose lookup search scores below {below:g}"
              + (f", and every task of fewer than {least} word pieces" if least else "") + " (docs/ENCODERS.md)")
    tau = "none" if s["otsu_tau"] is None else f"{s['otsu_tau']:.3f}"
    print(f"vocabulary {s['vocab_size']} terms; generic |T_g| = {s['n_generic']} (Otsu tau = {tau})")
    print(f"background rank r = {s['rank']} (effective rank {s['effective_rank']})")
    d = m["decisions"]
    print(f"decided ({d['rule']}): background removal {'on' if d['background'] else 'off'}, lexical side "
          f"{d['lexical']} weight {d['lexical_weight']:g}, fusion {d['fusion']}, candidates {d['candidates']}"
          + (", past the first 10 hits by RRF of the dense and lexical ranks" if d.get("continuation", default_continuation(d.get("lexical_evidence"))) == "rrf" else ""))
    print(format_abstention(info["abstention"]))
    sc = info["scan"]
    print(f"scan {sc['scan']}" + "".join(f", {k}={v}" for k, v in sc.items() if k not in ("scan", "files")))
    print("config " + ", ".join(f"{k}={v}" for k, v in m["config"].items()))
    sh = info["shards"]
    if sh is not None:
        print(f"shard folders: {sh['error']}" if "error" in sh else
              f"shard folders: {sh['shards']} in {sh['folder']} ({sh['scan']} scan), "
              + ("of this index: skillsight -c ray=ADDRESS serve serves them" if sh["current"] else
                 f"behind this index: skillsight update or skillsight split -i {args.index} {sh['shards']}"))
    return 0


def shards_info(directory: Any) -> dict | None:
    """The shard folders beside an index (``IDX.shards``): how many, and whether they are of the index
    as it is now (the layout names the index version it was written from); None when there are none."""
    from skillsight_fast.cluster.layout import LAYOUT, index_digest, read_layout, shards_folder

    folder = shards_folder(directory)
    if not (folder / LAYOUT).is_file():
        return None
    try:
        layout = read_layout(folder)
    except SkillsightError as exc:
        return {"folder": str(folder), "error": str(exc)}
    return {"folder": str(folder), "shards": len(layout["shards"]), "scan": layout.get("scan"),
            "current": layout.get("index") == index_digest(directory)}


def abstention_info(directory: Any, manifest: dict) -> dict:
    """What ``info`` says of abstention: the rule in use (``calibration.json`` from labelled tasks
    wins over the one derived at build) and the derived one."""
    from skillsight_fast.engine.abstention import read_calibration

    try:
        cal = read_calibration(directory)
    except SkillsightError as exc:
        cal = {"error": str(exc)}
    derived = manifest.get("abstention")
    in_use = ("calibration.json" if cal is not None and "error" not in cal
              else "derived" if derived and derived.get("threshold") is not None else "none")
    return {"in_use": in_use, "derived": derived,
            "calibration": None if cal is None else {k: cal.get(k) for k in ("signal", "threshold", "error")
                                                     if k in cal}}


def format_abstention(a: dict) -> str:
    """One line of ``info``: the abstention rule in use and where it comes from."""
    d = a.get("derived") or {}
    dup = d.get("duplicate_cosine")
    dup_text = (f"; copies: same name or cosine >= {dup:.3f}" if isinstance(dup, (int, float))
                else "; copies: same name only" if d else "")
    if a["in_use"] == "calibration.json":
        c = a["calibration"]
        return f"abstention {c['signal']} >= {c['threshold']:.4f} (calibration.json, from labelled tasks){dup_text}"
    if a["in_use"] == "derived":
        return (f"abstention {d['signal']} >= {d['threshold']:.4f} (derived at build without labels: "
                f"{d.get('n_pseudo', 0)} pseudo-tasks from the skills, {d.get('n_offtopic', 0)} off-topic tasks, "
                f"query encoder {d.get('query_encoder', '?')}){dup_text}")
    why = ("the skills' pseudo-tasks and the off-topic tasks did not separate" if d
           else "an index built before the label-free rule: rebuild it, or run calibrate")
    return f"abstention none ({why}){dup_text}"


def scan_info(manifest: dict) -> dict:
    """The manifest's scan section for ``info``: kind, parameters, bytes on disk (no faiss needed)."""
    import numpy as np

    section = manifest["scan"]  # read_manifest checked that it is an object
    arrays, files = section.get("arrays", {}), section.get("files", {})
    sizes = [int(np.prod(e["shape"])) * np.dtype(e["dtype"]).itemsize for e in arrays.values()]
    sizes += [int(e.get("bytes", 0)) for e in files.values()]
    return {"scan": section.get("kind"), **section.get("params", {}), "scan_bytes": sum(sizes),
            "files": sorted([*arrays, *files])}


def _add_rescan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rescan", help="change an index's dense candidate scan (exact, int8, ivf) without re-encoding")
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    add_scan_args(p, default=None)
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(func=cmd_rescan)


def cmd_rescan(args: argparse.Namespace) -> int:
    from skillsight_fast import SkillIndex
    from skillsight_fast.engine.update import index_write_lock

    t0 = time.perf_counter()
    with index_write_lock(args.index):  # load to save: an update meanwhile would undo the rescan
        index = SkillIndex.load(args.index, mmap=True)  # the matrices are read once; the new scan is built from them
        scan = index.rebuild_scan(args.scan, **scan_params(args))
        index.save(args.index)
    summary = {"index": str(args.index), "n_skills": len(index), **scan.describe(),
               "seconds": round(time.perf_counter() - t0, 2)}
    if args.json:
        emit_json(summary)
    else:
        print(f"{args.index}: scan {scan.kind} over {len(index)} skills in {summary['seconds']} s "
              f"({', '.join(f'{k}={v}' for k, v in scan.params().items()) or 'no parameters'})")
    return 0


def _add_warmup(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("warmup", help="compile the kernels and export the default encoder once")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--int8", action="store_true", help="only the int8-quantised encoder")
    p.set_defaults(func=cmd_warmup)
    settle(p, "warmup", ["--int8"])


def cmd_warmup(args: argparse.Namespace) -> int:
    from skillsight_fast.kernels.warmup import warmup_kernels
    from skillsight_fast.models import load_encoder

    t0 = time.perf_counter()
    warmup_kernels()
    encoder = load_encoder(args.model, int8=args.int8)
    encoder.encode(["warm up"])
    if not args.int8 and getattr(encoder, "onnx_path", None) is not None:
        load_encoder(args.model, int8=True).encode(["warm up"])  # the default index's task encoder
    print(f"kernels compiled and encoder {encoder.model_id} ready in {time.perf_counter() - t0:.1f} s")
    return 0


def _add_split(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("split", help="write an index's rows as shard folders (IDX.shards) for serve --ray")
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    p.add_argument("shards", type=_positive, metavar="N", help="number of shard folders")
    p.set_defaults(func=cmd_split)


def cmd_split(args: argparse.Namespace) -> int:
    """``skillsight split``: the shard folders of an index in ``IDX.shards`` (serve --ray opens them)."""
    from skillsight_fast.cluster.layout import shards_folder, split_index
    from skillsight_fast.engine.update import index_write_lock

    t0 = time.perf_counter()
    out = shards_folder(args.index)
    with index_write_lock(args.index):  # an update meanwhile would leave the folders behind the index
        layout = split_index(args.index, out, args.shards)
    print(f"{args.index}: {len(layout['shards'])} shard folders of {layout['n_skills']} skills "
          f"({layout['scan']} scan) in {out} in {time.perf_counter() - t0:.2f} s")
    return 0
