"""`aisctl` entry point: parse the subcommand and hand over to the module that does the work.

Exit codes: 0 success, 2 bad input (one line per problem naming the file, the document and the field, all
problems at once; `ascend_operator.cli.spec_files`), 1 anything else. Warnings and notes go to stderr so that
`aisctl render -f x.yaml | kubectl apply -f -` stays clean.
"""

import argparse
import importlib.metadata
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from ascend_operator.api.constants import API_VERSION, NPU_RESOURCE
from ascend_operator.api.parse import SpecError
from ascend_operator.cli import bench as bench_cmd
from ascend_operator.cli import operator as operator_cmd
from ascend_operator.cli import rollout as rollout_cmd
from ascend_operator.cli.budget import format_plan
from ascend_operator.cli.spec_files import Loaded, load
from ascend_operator.controller.steps import rendered
from ascend_operator.crd import build_crd
from ascend_operator.render.desired import Desired, Placement
from ascend_operator.render.pod import Owner
from ascend_operator.validation.budget import plan_budget
from ascend_operator.validation.validate import budget_input

EXIT_BAD_INPUT = 2


def _loaded(args: argparse.Namespace) -> Loaded:
    """Load the file and report every problem on stderr, one line each."""
    loaded = load(args.file, namespace=getattr(args, "namespace", None))
    for line in loaded.notices:
        print(line, file=sys.stderr)
    for line in loaded.errors:
        print(f"error: {line}", file=sys.stderr)
    return loaded


def cmd_render(args: argparse.Namespace) -> int:
    loaded = _loaded(args)
    if loaded.errors:
        return EXIT_BAD_INPUT
    placement = Placement(npu_resource=args.npu_resource, operator=operator_cmd.operator_peer(args))
    objects: list[dict[str, Any]] = []
    for svc in loaded.services:
        # the rows the reconcile pass walks (controller/steps.py): every object it creates, the role services' too
        owner = Owner(name=svc.name, namespace=svc.namespace)
        objects += rendered(Desired(spec=svc.spec, owner=owner, placement=placement))
    sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    loaded = _loaded(args)
    for svc in loaded.services:
        print(format_plan(svc.name, plan_budget(budget_input(svc.spec)), svc.spec))
    return EXIT_BAD_INPUT if loaded.errors else 0


def cmd_crd(args: argparse.Namespace) -> int:
    sys.stdout.write(yaml.safe_dump(build_crd(), sort_keys=False))
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    from ascend_operator.api.docs import api_table
    from ascend_operator.reference import doc_notes

    sys.stdout.write(api_table(notes=doc_notes()))
    return 0


def version() -> str:
    """The installed distribution's version."""
    try:
        return importlib.metadata.version("ascend-inference-operator")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aisctl", description=__doc__)
    parser.add_argument("--version", action="version", version=f"aisctl {version()} ({API_VERSION})")
    sub = parser.add_subparsers(dest="command", required=True)
    render = sub.add_parser(
        "render",
        help="print every object the operator creates for a spec: engine pods or LeaderWorkerSet, Service, "
        "NetworkPolicy, budget, router, P/D role services and what each becomes, InferencePool",
    )
    render.add_argument("-f", "--file", required=True, help="YAML file with AscendInferenceService(s), - for stdin")
    render.add_argument(
        "--npu-resource", default=NPU_RESOURCE, help="NPU resource name, as `aisctl operator --npu-resource`"
    )
    operator_cmd.add_operator_identity(render)
    render.add_argument(
        "-n", "--namespace", default=None, help="namespace for services that name none (default: default)"
    )
    render.set_defaults(func=cmd_render)
    plan = sub.add_parser("plan", help="print the HBM/KV budget per NPU with its verdict")
    plan.add_argument("-f", "--file", required=True, help="YAML file with AscendInferenceService(s), - for stdin")
    plan.set_defaults(func=cmd_plan)
    crd = sub.add_parser("crd", help="print the CustomResourceDefinition")
    crd.set_defaults(func=cmd_crd)
    docs = sub.add_parser("docs", help="print the API reference table (Markdown) that docs/api.md carries")
    docs.set_defaults(func=cmd_docs)
    operator_cmd.add_parser(sub)
    bench_cmd.add_parser(sub)
    rollout_cmd.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except SpecError as exc:  # a subcommand that reads a spec from elsewhere (aisctl bench: the cluster)
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return code


if __name__ == "__main__":
    sys.exit(main())
