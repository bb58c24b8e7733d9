"""The rule of spec.scheduling's Volcano settings, with its CEL twin, so `kubectl apply` refuses a queue
that no scheduler would read.

Why: Volcano's PodGroup controller handles only pods whose schedulerName is one of its own
(volcano-sh/volcano pkg/controllers/podgroup/pg_controller.go:162-165); a queue annotation on a pod the
default scheduler binds is read by nobody, and the service would run outside the queue its quota lives in
without a word.
"""

from ascend_operator.validation.rule import SpecRule

SCHEDULING_RULES: tuple[SpecRule, ...] = (
    SpecRule(
        name="VolcanoNeedsSchedulerName",
        field="spec.scheduling.volcano",
        message="spec.scheduling.volcano needs spec.scheduling.schedulerName (Volcano's name, `volcano` unless "
        "its scheduler runs with another --scheduler-name): Volcano reads the queue only of pods it schedules",
        check=lambda s: s.scheduling.volcano is None or s.scheduling.scheduler_name is not None,
        cel="!has(self.volcano) || has(self.schedulerName)",
        cel_scope=("scheduling",),
        cel_field_path=".volcano",
    ),
)
