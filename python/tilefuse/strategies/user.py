"""User strategies: a directory of transform scripts with TOML matchers.

`--strategies DIR` (or `$TILEFUSE_STRATEGIES`) names a directory holding,
for each user strategy, `NAME.mlir` (a transform script, written as for
`tilefuse try`: its entry `@__transform_main`, or its only public named
sequence, receives the dispatch's func.func and finishes the kernel) and
`NAME.toml`, which says which dispatches it takes and with what:

    [match]                      # every key optional; all must hold
    kinds = ["elementwise"]      # the root's kind: elementwise, reduction, matmul, other
    group_kinds = ["loop"]       # the fusion group's kind (loop, row-reduction, ...)
    targets = ["vulkan"]         # target names, or backends ("spirv", "cuda")
    ranks = [2]                  # how many loops the root has
    element_types = ["f32"]      # every input and output element type is one of these
    divisible_by = [8, 64]       # loop i's extent is a multiple of divisible_by[i]
    max_inputs = 4               # inputs of the root, at most

    [launch]
    workgroup = [16, 8, 1]       # threads per workgroup (x, y, z); required
    tile = [8, 64]               # optional: the root tile of a workgroup (outermost
                                 # first), for the grid `explain` shows

    [params.TAG]                 # the ops tagged `tilefuse.param = "TAG"` in the script
    ATTRIBUTE = VALUE            # integer: i64; list of integers: array<i64: ...>;
                                 # string: parsed as an MLIR attribute

The launch's workgroup and the target's subgroup size are set, as the
built-in strategies set theirs (strategies/attrs.py `workgroup`), on the ops
the script tags `workgroup_dims` (map_nested_forall_to_gpu_threads) and
`translation_info` (the final translation_info constant), if it tags them;
a finished kernel whose workgroup size is not `[launch] workgroup` is
refused. Strategies are tried in file-name order, before the built-ins; the
first whose matcher holds takes the dispatch, under the name `user:NAME`.
Its kernel is checked as every kernel is (kernel/verify.py, and distributed
as `tilefuse try` requires); if it fails, the dispatch gets the built-in
strategy it would have had, and the report says why.

A file that does not parse, an unknown key, a value of the wrong type, a tag
the script lacks: one TilefuseError naming the file (and its line where the
TOML parser or MLIR gives one).
"""

import math
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from iree.compiler import ir

from ..dispatch.read import Dispatch
from ..errors import TilefuseError
from ..irutil import translation_launch
from ..targets import Target
from . import attrs
from .contract import Launch, Strategy

ENV = "TILEFUSE_STRATEGIES"
PREFIX = "user:"

MATCH_KEYS = {
    "kinds": list,
    "group_kinds": list,
    "targets": list,
    "ranks": list,
    "element_types": list,
    "divisible_by": list,
    "max_inputs": int,
}
LAUNCH_KEYS = {"workgroup": list, "tile": list}
TOP_KEYS = {"match", "launch", "params", "description"}
# Tags whose values come from [launch] (attrs.workgroup), not from [params].
LAUNCH_TAGS = ("workgroup_dims", "translation_info")


@dataclass(frozen=True)
class UserStrategyParams:
    launch: Launch
    values: tuple  # ((tag, attribute, value), ...) from [params]


@dataclass(frozen=True)
class Matcher:
    kinds: tuple = ()
    group_kinds: tuple = ()
    targets: tuple = ()
    ranks: tuple = ()
    element_types: tuple = ()
    divisible_by: tuple = ()
    max_inputs: int | None = None

    def refusal(self, d: Dispatch, target: Target) -> str | None:
        """Why the dispatch does not match, or None."""
        if d.problem:
            return d.problem
        if self.targets and not {target.name, target.backend} & set(self.targets):
            return f"target {target.name} not in {list(self.targets)}"
        if self.kinds and d.kind not in self.kinds:
            return f"root kind {d.kind} not in {list(self.kinds)}"
        if self.group_kinds and d.group_kind not in self.group_kinds:
            return f"group kind {d.group_kind} not in {list(self.group_kinds)}"
        rank = len(d.loop_ranges)
        if self.ranks and rank not in self.ranks:
            return f"rank {rank} not in {list(self.ranks)}"
        types = {o.element_type for o in d.inputs + d.outputs}
        if self.element_types and not types <= set(self.element_types):
            return f"element types {sorted(types)} not all in {list(self.element_types)}"
        if self.max_inputs is not None and len(d.inputs) > self.max_inputs:
            return f"{len(d.inputs)} inputs, more than {self.max_inputs}"
        if self.divisible_by:
            if len(self.divisible_by) != rank:
                return f"divisible_by has {len(self.divisible_by)} dims, the root {rank}"
            if any(n <= 0 or k <= 0 or n % k for n, k in zip(d.loop_ranges, self.divisible_by)):
                return f"loops {d.loop_ranges} not multiples of {list(self.divisible_by)}"
        return None


def _line_of(text: str, key: str) -> int | None:
    for i, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*\"?{re.escape(key)}\"?\s*=", line) or re.match(
            rf"\s*\[\s*{re.escape(key)}\s*\]", line
        ):
            return i
    return None


def _where(path: Path, text: str, key: str) -> str:
    line = _line_of(text, key)
    return f"{path}:{line}" if line else str(path)


def _check_keys(table: dict, allowed: dict, section: str, path: Path, text: str) -> None:
    for key, value in table.items():
        if key not in allowed:
            raise TilefuseError(
                f"unknown key {key!r} in [{section}] (known: {', '.join(sorted(allowed))})",
                _where(path, text, key),
            )
        kind = allowed[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise TilefuseError(
                f"[{section}] {key} must be a {kind.__name__}, not {value!r}",
                _where(path, text, key),
            )


def _ints(values, what: str, path: Path, text: str, key: str) -> tuple[int, ...]:
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        raise TilefuseError(
            f"{what} must be positive integers, not {values!r}", _where(path, text, key)
        )
    return tuple(values)


def _attribute(value, ctx: ir.Context, path: Path, text: str, key: str) -> ir.Attribute:
    """A TOML value as the MLIR attribute a tagged op's property takes."""
    try:
        if isinstance(value, bool):
            return ir.BoolAttr.get(value, ctx)
        if isinstance(value, int):
            return attrs.i64(value, ctx)
        if isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            return attrs.i64_array(value, ctx)
        if isinstance(value, str):
            return ir.Attribute.parse(value, ctx)
    except ir.MLIRError as e:
        raise TilefuseError(
            f"{key} = {value!r} is not an MLIR attribute: {' '.join(str(e).split())}",
            _where(path, text, key),
        ) from None
    raise TilefuseError(
        f"{key} = {value!r}: give an integer, a list of integers, or an MLIR attribute as a string",
        _where(path, text, key),
    )


def load_strategy(toml_path: Path) -> Strategy:
    """One user strategy (NAME.toml and NAME.mlir beside it) as a Strategy record."""
    from ..authoring.script import STEP, USER_ENTRY, load_script
    from ..authoring.try_script import distribution_problem
    from ..irutil import PARAM_TAG, context, set_tagged, walk

    text = toml_path.read_text()
    try:
        spec = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        where = f"{toml_path}:{m.group(1)}:{m.group(2)}" if m else str(toml_path)
        raise TilefuseError(f"TOML does not parse: {str(e).split(' (at line')[0]}", where) from None
    for key in spec:
        if key not in TOP_KEYS:
            raise TilefuseError(
                f"unknown key {key!r} (known: {', '.join(sorted(TOP_KEYS))})",
                _where(toml_path, text, key),
            )
    match = spec.get("match", {})
    launch = spec.get("launch")
    params = spec.get("params", {})
    if not isinstance(match, dict) or not isinstance(params, dict):
        raise TilefuseError("[match] and [params] must be tables", str(toml_path))
    if not isinstance(launch, dict) or "workgroup" not in launch:
        raise TilefuseError(
            "[launch] workgroup = [x, y, z] is required (the threads the kernel maps onto)",
            str(toml_path),
        )
    _check_keys(match, MATCH_KEYS, "match", toml_path, text)
    _check_keys(launch, LAUNCH_KEYS, "launch", toml_path, text)
    workgroup = _ints(launch["workgroup"], "[launch] workgroup", toml_path, text, "workgroup")
    if len(workgroup) != 3:
        raise TilefuseError(
            "[launch] workgroup needs 3 sizes (x, y, z)", _where(toml_path, text, "workgroup")
        )
    tile = _ints(launch.get("tile", []), "[launch] tile", toml_path, text, "tile")
    matcher = Matcher(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in match.items()},
    )
    if matcher.divisible_by:
        _ints(matcher.divisible_by, "[match] divisible_by", toml_path, text, "divisible_by")

    script_path = toml_path.with_suffix(".mlir")
    if not script_path.is_file():
        raise TilefuseError(f"no script {script_path.name} beside it", str(toml_path))
    script = load_script(str(script_path))
    # The script's tags, and the [params] values checked against them now
    # (not when the first dispatch is compiled).
    ctx = context()
    tags = {
        ir.StringAttr(op.attributes[PARAM_TAG]).value
        for op in walk(ir.Module.parse(script.text, ctx).operation)
        if PARAM_TAG in op.attributes
    }
    values = []
    for tag, table in params.items():
        if not isinstance(table, dict):
            raise TilefuseError(
                f"[params] {tag} must be a table: [params.{tag}] ATTRIBUTE = VALUE",
                _where(toml_path, text, tag),
            )
        if tag not in tags:
            raise TilefuseError(
                f"[params.{tag}]: {script_path.name} has no op tagged "
                f'tilefuse.param = "{tag}" (its tags: {", ".join(sorted(tags)) or "none"})',
                _where(toml_path, text, f"params.{tag}"),
            )
        if tag in LAUNCH_TAGS:
            raise TilefuseError(
                f"[params.{tag}]: set from [launch] workgroup, not here",
                _where(toml_path, text, f"params.{tag}"),
            )
        for attribute, value in table.items():
            _attribute(value, ctx, toml_path, text, attribute)  # checked now
            values.append((tag, attribute, value))
    frozen_values = tuple((t, a, v if not isinstance(v, list) else tuple(v)) for t, a, v in values)
    name = PREFIX + toml_path.stem
    launch_tags = tuple(t for t in LAUNCH_TAGS if t in tags)

    def plan(d: Dispatch, target: Target):
        why = matcher.refusal(d, target)
        if why:
            return None, why
        grid = (1, 1, 1)
        if tile and len(tile) == len(d.loop_ranges):
            counts = [math.ceil(n / t) for n, t in zip(d.loop_ranges, tile)]
            counts = list(reversed(counts))  # innermost on x
            while len(counts) > 3:
                counts[2] *= counts.pop()
            grid = tuple((counts + [1, 1, 1])[:3])
        chosen = UserStrategyParams(Launch(grid, workgroup, target.subgroup_size), frozen_values)
        return chosen, f"user strategy {toml_path}"

    def attributes(p: UserStrategyParams, ctx: ir.Context) -> dict:
        setters: dict = {}
        for tag, attribute, value in p.values:
            value = list(value) if isinstance(value, tuple) else value
            setters.setdefault(tag, {})[attribute] = _attribute(
                value, ctx, toml_path, text, attribute
            )
        launch_setters = attrs.workgroup(p.launch, ctx)
        for tag in launch_tags:
            setters[tag] = launch_setters[tag]
        return setters

    def describe(p: UserStrategyParams) -> str:
        parts = []
        if tile:
            parts.append(f"grid={list(p.launch.grid)}")
        parts.append(f"wg={list(p.launch.workgroup)}")
        parts += [
            f"{tag}.{attribute}={list(v) if isinstance(v, tuple) else v}"
            for tag, attribute, v in p.values
        ]
        return " ".join(parts)

    def kernel_refusal(func, p: UserStrategyParams) -> str | None:
        problem = distribution_problem(func)
        if problem:
            return problem
        got, _ = translation_launch(func)
        if p is not None and got != p.launch.workgroup:
            return (
                f"the kernel's workgroup_size is {list(got)}, [launch] workgroup "
                f"{list(p.launch.workgroup)} (tag the script's translation_info and "
                "workgroup_dims, or make them agree)"
            )
        return None

    # The script with these values must still verify (a value of the wrong
    # type for its attribute fails here, naming the TOML, not in a compile).
    probe = ir.Module.parse(script.text, ctx)
    example = UserStrategyParams(Launch((1, 1, 1), workgroup, 32), frozen_values)
    set_tagged(probe.operation, attributes(example, ctx))
    try:
        probe.operation.verify()
    except ir.MLIRError as e:
        raise TilefuseError(
            f"{script_path.name} with these [params] does not verify: {' '.join(str(e).split())}",
            str(toml_path),
        ) from None

    return Strategy(
        name=name,
        plan=plan,
        describe=describe,
        attributes=attributes,
        steps=lambda p: {STEP: USER_ENTRY},
        kernel_refusal=kernel_refusal,
        script=script.text,
        entry="tilefuse_try",
    )


def load_directory(directory: str | Path | None) -> tuple[Strategy, ...]:
    """Every user strategy of `directory` (None: $TILEFUSE_STRATEGIES, else
    none), in file-name order."""
    if directory is None:
        directory = os.environ.get(ENV) or None
        if directory is None:
            return ()
    folder = Path(directory)
    if not folder.is_dir():
        raise TilefuseError(f"--strategies: no such directory: {folder}")
    tomls = sorted(folder.glob("*.toml"))
    scripts = {p.stem for p in folder.glob("*.mlir")}
    lonely = sorted(scripts - {p.stem for p in tomls})
    if lonely:
        raise TilefuseError(
            f"{lonely[0]}.mlir has no {lonely[0]}.toml (the matcher and parameters)",
            str(folder / f"{lonely[0]}.mlir"),
        )
    if not tomls:
        raise TilefuseError("no user strategy (NAME.toml with NAME.mlir) in it", str(folder))
    return tuple(load_strategy(p) for p in tomls)
