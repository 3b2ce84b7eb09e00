"""Check that every dispatch given a strategy really ran it.

Each strategy ends with `transform.print` of the finished kernel function.
iree-compile exits 0 even when the transform library fails to load, so the
absence of errors proves nothing; the printout does. We parse it and check
that the function carries the strategy's final translation info
(pipeline = no_pipeline with a workgroup size), no linalg op is left, and
no combine is left undistributed (a `vector.multi_reduction` or warp op run
by one thread would read partials other threads wrote, with no barrier
between them in the row kernel).
"""

from dataclasses import dataclass

from iree.compiler import ir

from ..dispatch.read import coalescing_text
from ..errors import TilefuseError
from ..irutil import context, symbol_name, walk
from ..strategies import BY_NAME, Choice
from . import ptx

PRINT_HEADER = "[[[ IR printer: ]]]"
# Ops a combine leaves when warp distribution did not take it apart.
UNDISTRIBUTED_COMBINE = ("vector.multi_reduction", "gpu.warp_execute_on_lane_0")


@dataclass
class DispatchReport:
    name: str
    kind: str
    shapes: str
    strategy: str | None
    params: str
    # "applied"; "fallback": no strategy takes it (reason says why);
    # "failed": its strategy failed (reason: the error), IREE's codegen ran it.
    status: str
    reason: str
    registers: int | None = None
    spill_bytes: int | None = None
    # How the root's operands are read and written along the lanes
    # (dispatch/read.coalescing_text); "" when not analysed.
    coalescing: str = ""

    def line(self) -> str:
        head = f"{self.name}  [{self.kind} {self.shapes}]"
        if self.status == "applied":
            text = f"{head}  strategy={self.strategy} {self.params}  applied ({self.reason})"
        elif self.status == "failed":
            text = f"{head}  IREE default codegen  FALLBACK: {self.reason}"
        else:
            text = f"{head}  IREE default codegen  fallback: {self.reason}"
        if self.coalescing:
            text += f"  coalescing: {self.coalescing}"
        if self.registers is not None:
            text += f"  ptxas: {self.registers} registers, {self.spill_bytes} spill bytes"
        return text


def printed_kernels(stderr: str) -> dict[str, str]:
    """Function name -> IR text, for every function the strategies printed."""
    kernels = {}
    # With threading, two headers can come before their two printouts (the
    # driver now runs phase 2 on one thread, but a log may come from
    # elsewhere), so each chunk is split into the functions it holds.
    for chunk in stderr.split(PRINT_HEADER)[1:]:
        for text in _functions_in(chunk):
            kernels.update(_parse_kernel(text))
    return kernels


def _functions_in(chunk: str) -> list[str]:
    """Each top-level `func.func ... }` block of a printout chunk."""
    found, lines = [], None
    for line in chunk.splitlines():
        if lines is None and line.startswith("func.func"):
            lines = []
        if lines is not None:
            lines.append(line)
            if line == "}":
                found.append("\n".join(lines))
                lines = None
    return found


def _parse_kernel(text: str) -> dict[str, str]:
    kernels = {}
    ctx = context(unregistered=True)
    try:
        module = ir.Module.parse(text, ctx)
    except ir.MLIRError as e:
        raise TilefuseError(f"cannot read a strategy's printed kernel: {e}") from None
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func":
            kernels[symbol_name(op)] = text
    return kernels


def _check_kernel(name: str, text: str, choice: Choice | None = None) -> str | None:
    ctx = context(unregistered=True)
    module = ir.Module.parse(text, ctx)  # keep it alive: func points into it
    func = module.body.operations[0].operation
    if "translation_info" not in func.attributes:
        return "no translation_info on the kernel"
    info = str(func.attributes["translation_info"])
    if "no_pipeline" not in info or "workgroup_size" not in info:
        return f"unexpected translation_info {info}"
    leftover = sorted({op.name for op in walk(func) if op.name.startswith(("linalg.", "tensor."))})
    if leftover:
        return f"{', '.join(leftover)} left after the strategy"
    serial = sorted({op.name for op in walk(func) if op.name in UNDISTRIBUTED_COMBINE})
    if serial:
        return f"{', '.join(serial)} left: a combine was not distributed over the threads"
    record = BY_NAME[choice.strategy] if choice and choice.strategy else None
    if record and record.kernel_refusal:
        return record.kernel_refusal(func, choice.params)
    return None


def _check_ptx(choice: Choice, ptx_files) -> str | None:
    entry = ptx.entry_text(list(ptx_files), choice.dispatch.name)
    if entry is None:
        return "no kernel of that name in the PTX"
    refusal = BY_NAME[choice.strategy].ptx_refusal
    return refusal(entry, choice.params) if refusal else None


def shapes_of(choice: Choice) -> str:
    d = choice.dispatch
    dims = "x".join(str(s) for s in d.loop_ranges) if d.loop_ranges else "?"
    types = sorted({o.element_type for o in d.inputs + d.outputs})
    return f"{dims} {','.join(types)}"


def kernel_problems(choices: list[Choice], log: str, ptx_files=()) -> dict[str, str]:
    """Dispatch name -> what is wrong, for every dispatch given a strategy
    whose printed kernel is missing or fails the checks above; for a
    strategy that configures IREE's pipeline (it prints no kernel), whose
    kernel is missing from the PTX (`ptx_files`) or fails its ptx_refusal."""
    kernels = printed_kernels(log)
    problems = {}
    for c in choices:
        if not c.strategy:
            continue
        name = c.dispatch.name
        record = BY_NAME[c.strategy]
        if record.configures:
            problem = _check_ptx(c, ptx_files)
            if problem:
                problems[name] = f"{c.strategy} left a wrong kernel: {problem}"
            continue
        if name not in kernels:
            problems[name] = (
                f"{c.strategy} did not run (no kernel printed; the transform library "
                f"was not applied); iree-compile said: {_tail(log)}"
            )
            continue
        problem = _check_kernel(name, kernels[name], c)
        if problem:
            problems[name] = f"{c.strategy} left a wrong kernel: {problem}"
    return problems


def reports(choices: list[Choice], failures: dict[str, str]) -> list[DispatchReport]:
    """One report per dispatch. `failures` names the dispatches whose strategy
    failed (phase 2 error or kernel_problems); IREE's codegen compiled them."""
    out = []
    for c in choices:
        d = c.dispatch
        # A fusion group's kind says what the dispatch is; the root's kind
        # alone would call a matmul with an epilogue "elementwise".
        kind = f"{d.group_kind} group, root {d.kind}" if d.group_kind else d.kind
        report = DispatchReport(
            name=d.name,
            kind=kind,
            shapes=shapes_of(c),
            strategy=c.strategy,
            params=c.describe_params(),
            status="fallback",
            reason=c.reason,
            coalescing=coalescing_text(_lane_strides(c)),
        )
        if d.name in failures:
            report.status, report.reason = "failed", failures[d.name]
        elif c.strategy:
            report.status = "applied"
        out.append(report)
    return out


def _lane_strides(c: Choice):
    """The strides along the loop the chosen kernel puts on a subgroup's
    lanes (IREE's codegen, or a strategy that names none: the innermost)."""
    strategy = BY_NAME.get(c.strategy) if c.strategy else None
    if strategy is None or strategy.lane_loop is None or not c.dispatch.lane_strides_by_loop:
        return c.dispatch.lane_strides
    return c.dispatch.lane_strides_by_loop[strategy.lane_loop(c.dispatch, c.params)]


def verify(choices: list[Choice], log: str, ptx_files=()) -> list[DispatchReport]:
    """Reports for a compile that must have applied every strategy it was
    given (library mode, tests); a missing or wrong kernel is an error."""
    problems = kernel_problems(choices, log, ptx_files)
    if problems:
        name, problem = next(iter(problems.items()))
        raise TilefuseError(f"dispatch {name}: {problem}")
    return reports(choices, {})


def _tail(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "error" in line]
    return lines[0].strip() if lines else "(nothing)"
