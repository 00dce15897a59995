"""Subcommands for agents and the people who run them: serve, calibrate, update.

Registered into ``skillsight`` through ``cli.COMMANDS``; heavy imports stay inside handlers.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

from skillsight_fast.cli._common import (
    add_abstention_args,
    emit_json,
    fraction,
    non_negative_int,
    port_number,
    positive_int,
)
from skillsight_fast.cli.proxy import add_proxy_args, cmd_proxy
from skillsight_fast.cli.settings import settle
from skillsight_fast.errors import SkillsightError

#: Shipped inside the package (package data), so an installed wheel finds it too.
DEFAULT_OFFTOPIC = Path(str(resources.files("skillsight_fast") / "data" / "offtopic_queries.txt"))


def register(sub: argparse._SubParsersAction) -> None:
    """Add serve, calibrate and update to the ``skillsight`` parser."""
    p = sub.add_parser("serve", help="serve an index to agents: MCP over stdio, or JSON over HTTP")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--mcp", action="store_true", help="MCP server over stdio (tools find_skills, get_skill)")
    mode.add_argument("--http", action="store_true",
                      help="JSON endpoint: GET /health, POST /search, GET /skill/<id>; and MCP (streamable HTTP) at /mcp")
    p.add_argument("-i", "--index", metavar="DIR", help="the index to serve (not with --proxy)")
    p.add_argument("--host", default="127.0.0.1",
                   help="HTTP address (default loopback 127.0.0.1; any other address needs a token)")
    p.add_argument("--port", type=port_number, default=8765, help="HTTP port (default 8765; 0 picks a free one)")
    p.add_argument("--token-file", metavar="FILE",
                   help="HTTP: every request needs 'Authorization: Bearer <token>', the token being this "
                        "file's first line (or the SKILLSIGHT_TOKEN environment variable)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="HTTP without a token: also accept this name in Host/Origin headers (repeatable; "
                        "loopback names are always accepted)")
    p.add_argument("--max-connections", type=positive_int, default=64, metavar="N",
                   help="HTTP: connections served at once; more get 503 (default 64)")
    add_abstention_args(p)
    p.add_argument("--mmap", action="store_true", help="memory-map the index (always, for an int8 or IVF scan)")
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="serve the index sharded over Ray actors of the cluster at ADDRESS ('auto': the running "
                        "one, 'local': start one here); the index folder must be readable at the same path on "
                        "every node (docs/LARGE.md)")
    p.add_argument("--shards", type=positive_int, default=2, metavar="N", help="with --ray: shards (default 2)")
    p.add_argument("--json", action="store_true", help="HTTP: print {url, n_skills} as JSON once ready")
    p.add_argument("-q", "--quiet", action="store_true", help="no startup message")
    p.add_argument("--watch", nargs="*", default=None, metavar="SOURCE",
                   help="live index: watch the library (the sources given to `index`; none: the folders "
                        "the index was built from) and swap in an updated index when skills change")
    p.add_argument("--debounce", type=non_negative_int, default=200, metavar="MS",
                   help="--watch: changes within MS milliseconds make one update (default 200)")
    p.add_argument("--endpoint", action="store_true",
                   help="MCP: also answer the prompt hook on a loopback HTTP port (published for the hook)")
    add_proxy_args(p)
    p.set_defaults(func=cmd_serve)
    settle(p, "serve", ["--allow-host", "--max-connections", "--min-score", "--min-cosine", "--mmap", "--ray",
                        "--shards", "--debounce", "--pin", "--tool-text", "--start-timeout",
                        "--call-timeout", "--index-cache"])

    p = sub.add_parser("calibrate", help="pick the abstention threshold (--min-score) from labelled + off-topic queries")
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    p.add_argument("--data", required=True, metavar="QUERIES",
                   help="labelled queries: a dataset folder or a .jsonl(.gz) file with gold ids")
    p.add_argument("--offtopic", action="append", default=None, metavar="QUERIES",
                   help="off-topic queries: a .txt list, dataset folder or .jsonl(.gz) (repeatable; "
                        "default: the list bundled with the package)")
    p.add_argument("--max-loss", type=fraction, default=0.05,
                   help="largest share of answerable tasks allowed to get no hit (default 0.05)")
    p.add_argument("--max-queries", type=positive_int, default=1000,
                   help="sample at most this many queries per source")
    p.add_argument("-k", type=positive_int, default=10, help="depth of the hit@k columns (default 10)")
    p.add_argument("--signal", choices=("cosine", "score"), default=None,
                   help="abstain on the raw cosine q.d or the fused score (default: whichever rejects more)")
    p.add_argument("--dry-run", action="store_true", help="report only; do not write calibration.json")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_calibrate)
    settle(p, "calibrate", ["--offtopic", "--max-loss", "--max-queries", "-k", "--signal"])

    p = sub.add_parser("update", help="re-index only added or changed skills (by content hash)")
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="the full library, as given to `index`")
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    p.add_argument("--strict", action="store_true", help="fail on the first broken skill instead of skipping it")
    p.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    p.add_argument("--json", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or warnings")
    p.set_defaults(func=cmd_update)


def _read_token(path: str | None) -> str | None:
    """The bearer token: the first line of ``path``, else $SKILLSIGHT_TOKEN, else None."""
    import os

    if path is None:
        return os.environ.get("SKILLSIGHT_TOKEN") or None
    from skillsight_fast.limits import read_regular_file

    raw = read_regular_file(path, 4096, error=SkillsightError, what="the token file")
    lines = raw.decode("utf-8", "replace").splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise SkillsightError(f"the token file {path} is empty")
    return token


def cmd_serve(args: argparse.Namespace) -> int:
    import threading

    if args.proxy:
        return cmd_proxy(args)
    if not args.index:
        raise SkillsightError("serve needs --index DIR (or --mcp --proxy CONFIG)")

    from skillsight_fast.agents import endpoint
    from skillsight_fast.agents.http import check_http_options, is_loopback, make_http_server
    from skillsight_fast.agents.mcp import build_mcp_server
    from skillsight_fast.agents.service import SkillService
    from skillsight_fast.engine.abstention import resolve_abstention
    from skillsight_fast.engine.io import read_manifest

    token = None
    if args.http:  # refuse bad settings before the index and the model are loaded
        token = _read_token(args.token_file)
        check_http_options(args.host, args.port, token, args.max_connections)
    read_manifest(Path(args.index).expanduser())  # a missing or broken index fails now, with a message
    rule = resolve_abstention(args.index, args.min_score, args.min_cosine)
    threshold = "none" if rule is None else f"{rule.signal} >= {rule.threshold:.4f}"
    # MCP: answer `initialize` at once and load + warm up behind it; HTTP: ready before listening
    if args.ray:  # the same service, its rows on Ray actors (skillsight_fast.cluster)
        from skillsight_fast.cluster.index import ShardedIndex

        sharded = ShardedIndex.open(args.index, args.shards, address=None if args.ray == "local" else args.ray)
        service = SkillService(args.index, abstention=rule, index=sharded)
    else:
        service = SkillService(args.index, abstention=rule, mmap=args.mmap, defer=args.mcp)
    watcher = None

    def after_warm_up() -> None:
        nonlocal watcher
        if args.watch is not None:
            watcher = _start_watcher(args, service)

    if args.mcp:
        server = build_mcp_server(service)
        ready = service.start()
        secret = endpoint.new_secret()
        side = (make_http_server(service, "127.0.0.1", 0, mcp=False, endpoint_secret=secret)
                if args.endpoint else None)
        if side is not None:
            endpoint.withdraw_on_signals(args.index)  # SIGTERM/SIGHUP remove the endpoint file too

        def background() -> None:
            ready.join()
            try:
                service.live()
            except SkillsightError:  # nothing loaded: every call says why; no endpoint, no watcher
                return
            try:
                after_warm_up()
            except Exception as exc:  # noqa: BLE001 - the MCP server keeps serving without watching
                print(f"skillsight: --watch disabled: {exc}", file=sys.stderr)
            if side is not None:
                threading.Thread(target=side.serve_forever, daemon=True, name="skillsight-endpoint").start()
                endpoint.publish(args.index, side.url, secret)

        threading.Thread(target=background, daemon=True, name="skillsight-start").start()
        if not args.quiet:
            print(f"skillsight MCP server: loading {args.index} in the background, abstention {threshold}; "
                  "on stdio", file=sys.stderr)
        from skillsight_fast.agents.stdin_filter import filtered_stdin

        try:
            with filtered_stdin():  # a lone surrogate escape would make the SDK drop the request
                server.run("stdio")
        finally:
            if side is not None:
                endpoint.withdraw(args.index)
            if watcher is not None:
                watcher.stop()
        return 0
    service.warm()
    after_warm_up()
    secret = endpoint.new_secret() if is_loopback(args.host) else None
    server = make_http_server(service, args.host, args.port, token=token, allow_hosts=tuple(args.allow_host),
                              max_connections=args.max_connections, endpoint_secret=secret)
    try:  # publish inside the try: an interrupt right after start-up still withdraws the endpoint
        if secret is not None:  # the prompt hook asks it with the record's secret (a --token-file server too)
            endpoint.withdraw_on_signals(args.index)
            endpoint.publish(args.index, server.url, secret)
        if args.json:
            emit_json({"url": server.url, "n_skills": len(service.index), "abstention": service.health()["abstention"],
                       "watching": [str(s) for s in watcher.sources] if watcher is not None else None})
        elif not args.quiet:
            shards = getattr(service.index, "shards", None)
            where = ""
            if args.ray and shards is not None:  # say where the rows are: shard folders or row ranges
                layout = getattr(service.index, "layout", None)
                where = (f" over {len(shards)} Ray shards"
                         + (f" (folders in {layout})" if layout is not None else " (row ranges of the index)"))
            print(f"skillsight serving {len(service.index)} skills{where} on {server.url} (abstention {threshold}); "
                  "GET /health, POST /search, GET /skill/<id>, MCP at /mcp"
                  + (f"; watching {', '.join(map(str, watcher.sources))}" if watcher is not None else ""),
                  file=sys.stderr)
        server.serve_forever()
    finally:
        endpoint.withdraw(args.index)
        if watcher is not None:
            watcher.stop()
        server.server_close()
    return 0


def _start_watcher(args: argparse.Namespace, service):
    from skillsight_fast.agents.watch import LiveIndexWatcher, sources_of
    from skillsight_fast.engine.abstention import resolve_abstention

    sources = args.watch or sources_of(service.index)
    watcher = LiveIndexWatcher(service, sources, debounce_ms=args.debounce,
                             rule=lambda d: resolve_abstention(d, args.min_score, args.min_cosine))
    return watcher.start()


def cmd_calibrate(args: argparse.Namespace) -> int:
    from skillsight_fast import SkillIndex
    from skillsight_fast.engine.abstention import calibrate, sample, write_calibration
    from skillsight_fast.library.queries import read_queries

    index = SkillIndex.load(args.index)
    ids = set(index.ids)
    labelled = [q for q in read_queries(args.data) if any(g in ids for g in q.gold)]
    if not labelled:
        raise SkillsightError(f"no query of {args.data} has a gold skill in {args.index} (wrong index or data?)")
    labelled = sample(labelled, args.max_queries)
    sources = args.offtopic or [str(DEFAULT_OFFTOPIC)]
    if not args.offtopic and not DEFAULT_OFFTOPIC.is_file():
        raise SkillsightError("no off-topic queries: pass --offtopic FILE (a .txt list, dataset or .jsonl)")
    offtopic = {}
    for src in sources:
        name = Path(src).name.split(".")[0] if Path(src).is_file() else Path(src).name
        offtopic[name] = [q for q in sample(read_queries(src), args.max_queries)
                          if not any(g in ids for g in q.gold)]
    result = calibrate(index, labelled, offtopic, max_loss=args.max_loss, k=args.k, signal=args.signal)
    result["data"] = str(args.data)
    result["offtopic_sources"] = sources
    if not args.dry_run:
        write_calibration(args.index, result)
    if args.json:
        emit_json(result)
        return 0
    print(f"calibrated {args.index} on {len(labelled)} answerable and {result['n_offtopic']} off-topic queries "
          f"({', '.join(f'{n} {c}' for n, c in result['n_offtopic_by_source'].items())})")
    print(f"{'signal':>6} {'max loss':>8} {'threshold':>10} {'off-topic rejected':>19} {'answerable lost':>16} "
          f"{'hit@' + str(args.k):>8}")
    for sig, res in result["signals"].items():
        for row in res["table"]:
            print(f"{sig:>6} {row['target_loss'] * 100:>7.0f}% {row['threshold']:>10.4f} "
                  f"{row['offtopic_rejected'] * 100:>18.1f}% {row['answerable_lost'] * 100:>15.1f}% "
                  f"{row['hit_at_k'] * 100:>7.1f}%")
    print(f"chosen: {result['signal']} >= {result['threshold']:.4f} (max loss {args.max_loss:.0%}): rejects "
          f"{result['offtopic_rejected']:.1%} of off-topic tasks, loses {result['answerable_lost']:.1%} of "
          f"answerable ones; hit@{args.k} {result['hit_at_k_before']:.1%} -> {result['hit_at_k']:.1%}"
          + ("" if args.dry_run else f"; saved to {Path(args.index) / 'calibration.json'}"))
    if len(offtopic) > 1:
        print("off-topic rejected by source: " + ", ".join(
            f"{n} {v:.1%}" for n, v in result["offtopic_rejected_by_source"].items()))
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    from skillsight_fast.engine.update import update_index
    from skillsight_fast.library.skills import load_skills
    from skillsight_fast.progress import ProgressEncoder

    report = load_skills(args.sources, strict=args.strict)
    if not args.quiet:
        for problem in report.problems:
            print(f"skipped {problem}", file=sys.stderr)
    wrap = None
    if not args.quiet:  # a bar on a terminal, a line every few seconds elsewhere
        def wrap(encoder):
            return ProgressEncoder(encoder, desc="encoding changed skills")
    from skillsight_fast.cluster.layout import LAYOUT, shards_folder

    shards = None
    if (shards_folder(args.index) / LAYOUT).is_file():  # shard folders (skillsight split): only the changed ones
        from skillsight_fast.cluster.update import update_layout
        from skillsight_fast.engine.update import UpdateReport

        shards = update_layout(args.index, shards_folder(args.index), report.skills, dry_run=args.dry_run,
                               wrap_encoder=wrap, roots=report.roots)
        result = UpdateReport(**shards.pop("update"))
    else:
        result = update_index(args.index, report.skills, dry_run=args.dry_run, wrap_encoder=wrap, roots=report.roots)
    out = result.to_dict() | {"index": str(args.index), "dry_run": args.dry_run,
                              "skipped": [str(p) for p in report.problems]}
    if shards is not None:
        out["shards"] = shards
    if args.json:
        emit_json(out)
    elif not args.quiet:
        verb = "would update" if args.dry_run else "updated"
        print(f"{verb} {args.index}: {len(result.added)} added, {len(result.changed)} changed, "
              f"{len(result.removed)} removed, {result.unchanged} unchanged; {result.encoded} encoded, "
              f"{result.n_skills} skills, {result.seconds} s")
        if shards is not None:
            how = ("statistics recomputed" if shards["recomputed"] else "background basis kept")
            sums = {"moved": "; token directions moved by the changed rows",
                    "summed": "; token directions summed over the postings"}.get(shards.get("directions"), "")
            print(f"shard folders: {len(shards['rewritten'])} rewritten {shards['rewritten']}, "
                  f"{len(shards['kept'])} untouched, {shards['appended']} appended; {how} "
                  f"(drift {shards['drift']}, rule {shards['max_drift']}{sums})")
    return 0
