"""``skillsight eval``: retrieval quality of every method on datasets in the shared format."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from skillsight_fast.cli._common import add_abstention_args, non_negative_int, positive_int
from skillsight_fast.cli.settings import settle
from skillsight_fast.config import DEFAULT_MODEL


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``eval`` subcommand (under ``lab``)."""
    p = subparsers.add_parser("eval", help="evaluate retrieval methods on labelled datasets")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", action="append", metavar="DIR", help="dataset folder (repeatable)")
    src.add_argument("--all", action="store_true",
                     help="the five shared datasets under --data-root (skillsbench, sra_theoremqa, bfcl, metatool, gorilla_hf)")
    src.add_argument("--triggers", metavar="FILE|DIR",
                     help="a skill-creator trigger-eval file [{query, should_trigger}] (with --skill), or a folder "
                          "of them named after their skills; needs -i")
    src.add_argument("--offtopic", metavar="FILE",
                     help="abstention on your own library: a JSON-lines file of {prompt, gold: [ids]} (gold [] = "
                          "off topic) or a .txt list of off-topic prompts; reports off-topic silence and the "
                          "on-topic answers the threshold loses; needs -i")
    p.add_argument("-i", "--index", metavar="DIR", help="--triggers / --offtopic: the index to run the prompts against")
    p.add_argument("--skill", metavar="ID", help="--triggers: the skill the file is about (default: the file name)")
    p.add_argument("-k", type=positive_int, default=None,
                   help="--triggers: the skill triggers when it is in the top k (default 5); --offtopic: hits "
                        "asked for (default 3, as the hook)")
    p.add_argument("--cut", choices=("task", "hit"), default="hit",
                   help="--triggers: the threshold drops each hit below it (hit, default) or a whole answer (task)")
    add_abstention_args(p)
    p.add_argument("--data-root", metavar="DIR", help="folder holding the datasets (default: the checkout's data/)")
    p.add_argument("--methods", help="comma-separated methods (default: all); see skillsight_fast.lab.evaluation.methods")
    p.add_argument("--json", metavar="OUT", help="write results as JSON")
    p.add_argument("--markdown", metavar="OUT", help="write the results tables as Markdown")
    p.add_argument("--limit", type=positive_int, metavar="N", help="only the first N queries of each dataset")
    p.add_argument("--all-queries", action="store_true", help="metatool: all 20,544 queries, not the 2,000 subset")
    p.add_argument("--model", default=DEFAULT_MODEL, help="encoder for every dense method")
    p.add_argument("--int8", action="store_true", help="int8 encoder (documents and tasks)")
    from skillsight_fast.cli.core import add_query_encoder_args

    add_query_encoder_args(p, evaluation=True)
    p.add_argument("--cross-encoder", metavar="PATH", help="a trained cross-encoder (folder or .onnx) for dense+rerank")
    p.add_argument("--rerank-queries", type=non_negative_int, default=20, metavar="N",
                   help="dense+rerank scores only the first N queries (0 = all; ~0.1 s per pair)")
    p.add_argument("--ablations", action="store_true", help="run the ablation sweeps instead of the method table")
    p.add_argument("--chunks", action="store_true",
                   help="ablations: also head-vs-chunk-mean document embeddings (encodes up to 8 chunks per doc)")
    p.add_argument("--bootstrap", type=positive_int, default=2000, metavar="N", help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling and the bootstrap")
    p.add_argument("--cache-dir", metavar="DIR", help="cache root (default: the per-user cache)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress log, no table")
    p.add_argument("--as-configured", action="store_true",
                   help="the skillsight method as configured (IndexConfig(), int8 tasks), not what ships "
                        "(the cascade; the tool config for kind tools/apis)")
    p.set_defaults(func=cmd_eval)
    settle(p, "eval", ["--all", "--skill", "-k", "--cut", "--min-score", "--min-cosine", "--data-root", "--methods",
                       "--markdown", "--limit", "--all-queries", "--model", "--int8", "--query-encoder",
                       "--query-model", "--query-int8", "--cross-encoder", "--rerank-queries", "--ablations",
                       "--chunks", "--bootstrap", "--seed", "--cache-dir", "--quiet", "--as-configured"])


def _table(objs: list[dict[str, Any]]) -> str:
    lines = []
    for obj in objs:
        lines.append(f"{obj['dataset']} ({obj['n_docs']:,} docs, {obj['n_queries']:,} queries)")
        lines.append(f"  {'method':<18}{'R@1':>7}{'R@10':>7}{'R@50':>7}{'nDCG@10':>9}{'MRR@10':>8}{'Cmp@10':>8}   n")
        for m, r in obj["results"].items():
            lines.append(f"  {m:<18}{100*r['recall@1']:>7.1f}{100*r['recall@10']:>7.1f}{100*r['recall@50']:>7.1f}"
                         f"{100*r['ndcg@10']:>9.1f}{100*r['mrr@10']:>8.1f}{100*r['completeness@10']:>8.1f}   {obj['n_queries_by_method'][m]}")
    return "\n".join(lines)


def cmd_triggers(args: argparse.Namespace) -> int:
    """``eval --triggers``: trigger and false-trigger rates at the calibrated threshold."""
    from skillsight_fast import SkillIndex
    from skillsight_fast.authoring.triggers import evaluate_triggers, format_triggers, read_triggers
    from skillsight_fast.engine.abstention import resolve_abstention
    from skillsight_fast.errors import QueryError

    if not args.index:
        raise QueryError("eval --triggers needs the index to test: -i DIR")
    cases = read_triggers(args.triggers, args.skill)
    index = SkillIndex.load(args.index)
    rule = resolve_abstention(args.index, args.min_score, args.min_cosine)
    result = evaluate_triggers(index, cases, k=args.k, abstention=rule, cut=args.cut, n_boot=args.bootstrap,
                               seed=args.seed)
    result["index"], result["triggers"] = str(args.index), str(args.triggers)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(format_triggers(result))
    return 0


def cmd_offtopic(args: argparse.Namespace) -> int:
    """``eval --offtopic``: off-topic silence and on-topic loss of the index's abstention rule."""
    from skillsight_fast import SkillIndex
    from skillsight_fast.engine.abstention import resolve_abstention
    from skillsight_fast.errors import QueryError
    from skillsight_fast.lab.evaluation.abstention import (
        evaluate_abstention,
        format_abstention_eval,
        read_prompts,
    )

    if not args.index:
        raise QueryError("eval --offtopic needs the index to test: -i DIR")
    prompts = read_prompts(args.offtopic)
    index = SkillIndex.load(args.index)
    rule = resolve_abstention(args.index, args.min_score, args.min_cosine)
    result = evaluate_abstention(index, prompts, rule, k=args.k or 3, cut=args.cut, n_boot=args.bootstrap,
                                 seed=args.seed)
    result["index"], result["prompts"] = str(args.index), str(args.offtopic)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(format_abstention_eval(result))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    if args.offtopic:
        return cmd_offtopic(args)
    if args.triggers:
        if args.k is None:
            args.k = 5
        return cmd_triggers(args)
    from skillsight_fast.lab.evaluation.datasets import SHARED_DATASETS, default_data_root, load_dataset
    from skillsight_fast.lab.evaluation.methods import DEFAULT_METHODS, METHODS, EvalContext
    from skillsight_fast.lab.evaluation.report import write_markdown
    from skillsight_fast.lab.evaluation.run import evaluate_dataset, strip_private

    if not args.quiet:
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    root = Path(args.data_root) if args.data_root else default_data_root()
    folders = [root / n for n in SHARED_DATASETS] if args.all else [Path(d) for d in args.data]
    methods = [m.strip() for m in args.methods.split(",")] if args.methods else list(DEFAULT_METHODS)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        print(f"error: unknown method(s) {unknown}; choose from {', '.join(METHODS)}", file=sys.stderr)
        return 2
    if args.query_int8 and args.query_encoder != "transformer":
        print("error: --query-int8 applies to transformer queries (drop --query-encoder)", file=sys.stderr)
        return 2
    if args.ablations and (args.query_encoder != "transformer" or args.query_int8 is not None):
        print("error: --ablations runs with float32 transformer queries only (drop --query-encoder / "
              "--query-int8)", file=sys.stderr)
        return 2
    if args.ablations:
        from skillsight_fast.lab.evaluation.ablations import run_ablations

        out = run_ablations(folders, model=args.model, int8=args.int8, cache_dir=args.cache_dir,
                            limit=args.limit, all_queries=args.all_queries, seed=args.seed,
                            chunks=args.chunks)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
        if args.markdown:
            from skillsight_fast.lab.evaluation.report import ablation_markdown

            Path(args.markdown).write_text(ablation_markdown(out))
        if not args.json and not args.markdown:
            print(json.dumps(out, indent=1))
        return 0
    objs = []
    t0 = time.perf_counter()
    for folder in folders:
        ds = load_dataset(folder, all_queries=args.all_queries, limit=args.limit)
        ctx = EvalContext(ds, model=args.model, int8=args.int8, cache_dir=args.cache_dir, seed=args.seed,
                          cross_encoder=args.cross_encoder, rerank_queries=args.rerank_queries,
                          query_encoder=args.query_encoder, query_model=args.query_model,
                          query_int8=args.query_int8, shipped=not args.as_configured)
        objs.append(evaluate_dataset(ctx, methods, n_boot=args.bootstrap, seed=args.seed))
    clean = [strip_private(o) for o in objs]
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        if len(clean) == 1:
            out.write_text(json.dumps(clean[0], indent=1) + "\n")
        else:
            out.write_text(json.dumps({"datasets": clean, "seconds": round(time.perf_counter() - t0, 1)},
                                      indent=1) + "\n")
            for o in clean:
                out.with_name(f"{out.stem}-{o['dataset']}.json").write_text(json.dumps(o, indent=1) + "\n")
    if args.markdown:
        write_markdown(clean, Path(args.markdown))
    if not args.quiet:
        print(_table(clean))
    return 0
