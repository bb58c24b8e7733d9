"""`aisctl` entry point: parse the subcommand and hand over to the module that does the work.

Exit codes: 0 success, 2 bad input (the message names the field and the rule), 1 anything else. Warnings
and notes go to stderr so that `aisctl render -f x.yaml | kubectl apply -f -` stays clean.
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from ascend_operator.api.constants import NPU_RESOURCE
from ascend_operator.api.crd import build_crd
from ascend_operator.api.parse import ParsedService, SpecError, parse_resource
from ascend_operator.cli import bench as bench_cmd
from ascend_operator.cli import operator as operator_cmd
from ascend_operator.cli.plan import format_plan
from ascend_operator.render.inferencepool import build_inference_pool
from ascend_operator.render.lws import build_leader_worker_set, is_multi_node
from ascend_operator.render.netpol import build_network_policy
from ascend_operator.render.pod import Owner, build_pod, build_service
from ascend_operator.validation import Severity, validate_spec
from ascend_operator.validation.budget import plan_budget
from ascend_operator.validation.validate import budget_input

EXIT_BAD_INPUT = 2


def load_services(path: str) -> list[ParsedService]:
    """Every AscendInferenceService in a YAML file ('-' for stdin)."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    services = [parse_resource(doc) for doc in docs if doc.get("kind") == "AscendInferenceService"]
    if not services:
        raise SpecError([f"{path}: no AscendInferenceService in the file"])
    return services


def _report(service: ParsedService) -> bool:
    """Print findings to stderr; True when the spec has no error."""
    ok = True
    for finding in validate_spec(service.spec):
        print(f"{service.name}: {finding}", file=sys.stderr)
        ok = ok and finding.severity is not Severity.ERROR
    return ok


def cmd_render(args: argparse.Namespace) -> int:
    services = load_services(args.file)
    verdicts = [_report(svc) for svc in services]  # report every service before deciding
    if not all(verdicts):
        return EXIT_BAD_INPUT
    objects = []
    for svc in services:
        owner = Owner(name=svc.name, namespace=svc.namespace)
        if is_multi_node(svc.spec):
            objects.append(build_leader_worker_set(svc.spec, owner=owner, npu_resource=args.npu_resource))
        else:
            objects += [
                build_pod(svc.spec, owner=owner, replica=i, npu_resource=args.npu_resource)
                for i in range(svc.spec.replicas)
            ]
        objects.append(build_service(svc.spec, owner=owner))
        if svc.spec.routing.inference_pool.enabled:
            objects.append(build_inference_pool(svc.spec, owner=owner))
        policy = build_network_policy(svc.spec, owner=owner, operator=operator_cmd.operator_peer(args))
        if policy is not None:
            objects.append(policy)
    sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    services = load_services(args.file)
    verdicts = [_report(svc) for svc in services]
    for svc in services:
        print(format_plan(svc.name, plan_budget(budget_input(svc.spec)), svc.spec))
    return 0 if all(verdicts) else EXIT_BAD_INPUT


def cmd_crd(args: argparse.Namespace) -> int:
    sys.stdout.write(yaml.safe_dump(build_crd(), sort_keys=False))
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    from ascend_operator.api.docs import api_table

    sys.stdout.write(api_table())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aisctl", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    render = sub.add_parser("render", help="print the pods, Service, NetworkPolicy and InferencePool a spec becomes")
    render.add_argument("-f", "--file", required=True, help="YAML file with AscendInferenceService(s), - for stdin")
    render.add_argument(
        "--npu-resource", default=NPU_RESOURCE, help="NPU resource name, as `aisctl operator --npu-resource`"
    )
    operator_cmd.add_operator_identity(render)
    render.set_defaults(func=cmd_render)
    plan = sub.add_parser("plan", help="print the HBM/KV budget per NPU with its verdict")
    plan.add_argument("-f", "--file", required=True, help="YAML file with AscendInferenceService(s), - for stdin")
    plan.set_defaults(func=cmd_plan)
    crd = sub.add_parser("crd", help="print the CustomResourceDefinition")
    crd.set_defaults(func=cmd_crd)
    docs = sub.add_parser("docs", help="print the API reference table (Markdown) that README.md carries")
    docs.set_defaults(func=cmd_docs)
    operator_cmd.add_parser(sub)
    bench_cmd.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except SpecError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return code


if __name__ == "__main__":
    sys.exit(main())
