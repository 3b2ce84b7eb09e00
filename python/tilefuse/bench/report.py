"""Bench results as a terminal table, JSON, and a markdown report with a chart.

Every ratio is tilefuse / IREE: below 1 means tilefuse moves fewer bytes, is
modeled faster, runs faster on lavapipe or compiles faster.
"""

import math
from pathlib import Path

from ..errors import TilefuseError
from ..paths import shown
from .gpu import COMPILERS
from .measure import median
from .run import ModelResult

MB = 1e6


def _ratio(a, b) -> float | None:
    return a / b if a is not None and b else None


def _fmt(value, spec=".2f", missing="-") -> str:
    return missing if value is None else format(value, spec)


def _pair(figures: dict, spec: str, scale: float | None = None) -> str:
    """tilefuse's and IREE's figure as "tf/iree" (each / scale), "-" for one missing."""
    values = [figures[c] for c in COMPILERS]
    if scale:
        values = [None if v is None else v / scale for v in values]
    return "/".join(_fmt(v, spec) for v in values)


def compared(results: list[ModelResult]) -> list[ModelResult]:
    """The models both compilers compiled: the ones with tilefuse / IREE ratios."""
    return [r for r in results if "iree" in r.runs]


def baseline_lines(results: list[ModelResult]) -> list[str]:
    """One line per model plain iree-compile rejected, with its first error."""
    return [
        f"plain iree-compile rejected {r.name}: {r.baseline_error}"
        for r in results
        if r.baseline_error is not None
    ]


def summary_row(r: ModelResult, gpu: str) -> dict:
    """The figures of one model that the table, the JSON and the chart share.
    A model plain iree-compile rejected has None for IREE's figures and for
    every ratio."""
    tf, iree = r.runs["tilefuse"], r.runs.get("iree")

    def each(figure) -> dict:
        return {c: figure(r.runs[c]) if c in r.runs else None for c in COMPILERS}

    modeled = {c: r.modeled_seconds[gpu].get(c) for c in COMPILERS}
    wall = each(lambda run: median(run.wall_seconds))
    # The ratio is the median of the rounds' own ratios: the two compilers'
    # calls alternate, so a drift of the machine's speed (a shared VM) hits
    # both calls of a round alike and cancels.
    paired = [a / b for a, b in zip(tf.wall_seconds, iree.wall_seconds) if b > 0] if iree else []
    return {
        "model": r.name,
        "dispatches": each(lambda run: run.dispatch_count),
        "bytes": each(lambda run: run.costs.bytes),
        "floor_bytes": r.floor_bytes,
        "bytes_over_floor": each(
            lambda run: run.costs.bytes / r.floor_bytes if r.floor_bytes else None
        ),
        "modeled_us": {c: None if s is None else s * 1e6 for c, s in modeled.items()},
        "modeled_ratio": _ratio(modeled["tilefuse"], modeled["iree"]),
        "wall_ms": {c: None if wall[c] is None else wall[c] * 1e3 for c in COMPILERS},
        "wall_ratio": median(paired),
        "compile_s": each(lambda run: run.compile_seconds),
        "compile_ratio": _ratio(tf.compile_seconds, iree.compile_seconds if iree else None),
        "numerics": r.numerics,
        "baseline_error": r.baseline_error,
    }


COLUMNS = [
    ("model", lambda s: s["model"]),
    ("dispatches tf/iree", lambda s: _pair(s["dispatches"], "d")),
    ("MB tf/iree", lambda s: _pair(s["bytes"], ".2f", MB)),
    ("floor MB", lambda s: f"{s['floor_bytes'] / MB:.2f}"),
    ("bytes/floor tf/iree", lambda s: _pair(s["bytes_over_floor"], ".2f")),
    (
        "modeled us tf/iree (ratio)",
        lambda s: f"{_pair(s['modeled_us'], '.1f')} ({_fmt(s['modeled_ratio'])})",
    ),
    (
        "lavapipe ms tf/iree (ratio)",
        lambda s: f"{_pair(s['wall_ms'], '.1f')} ({_fmt(s['wall_ratio'])})",
    ),
    (
        "compile s tf/iree (ratio)",
        lambda s: f"{_pair(s['compile_s'], '.1f')} ({_fmt(s['compile_ratio'])})",
    ),
    ("numerics", lambda s: s["numerics"]),
]


def _table(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*row) for row in [header, *rows])


def summary_table(results: list[ModelResult], gpu: str, markdown: bool = False) -> str:
    rows = [[str(get(summary_row(r, gpu))) for _, get in COLUMNS] for r in results]
    if len(results) > 1:
        rows.append(total_row(results))
    return _table([name for name, _ in COLUMNS], rows, markdown)


def total_row(results: list[ModelResult]) -> list[str]:
    """Dispatches and bytes summed over the models, bytes/floor as the
    geometric mean of the models' own ratios (a model with no floor left out).
    Only models both compilers compiled count, so that the two sides sum the
    same programs: the label says how many of all that is."""
    both = compared(results)
    label = f"all {len(both)}"
    if len(both) < len(results):
        label += f" IREE compiled, of {len(results)}"
    row = {"model": f"{label} (sum; bytes/floor: geomean)"}
    if both:
        dispatches = {c: sum(r.runs[c].dispatch_count for r in both) for c in COMPILERS}
        moved = {c: sum(r.runs[c].costs.bytes for r in both) for c in COMPILERS}
        geomean = {}
        for c in COMPILERS:
            ratios = [r.runs[c].costs.bytes / r.floor_bytes for r in both if r.floor_bytes]
            ratios = [x for x in ratios if x > 0]
            geomean[c] = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
        row.update(
            {
                "dispatches tf/iree": _pair(dispatches, "d"),
                "MB tf/iree": _pair(moved, ".2f", MB),
                "floor MB": f"{sum(r.floor_bytes for r in both) / MB:.2f}",
                "bytes/floor tf/iree": _pair(geomean, ".2f"),
            }
        )
    return [row.get(name, "-") for name, _ in COLUMNS]


def kernel_table(results: list[ModelResult], markdown: bool = False) -> str:
    header = ["model", "compiler", "kernel", "arch", "regs", "spill B", "smem B", "threads", "occ."]
    rows = []
    for r in results:
        for compiler in COMPILERS:
            for k in r.kernels.get(compiler, []):
                rows.append(
                    [
                        r.name,
                        compiler,
                        k.kernel,
                        k.arch,
                        str(k.registers),
                        str(k.spill_bytes),
                        str(k.shared_bytes),
                        str(k.threads),
                        f"{k.occupancy:.0%}",
                    ]
                )
    return _table(header, rows, markdown) if rows else ""


def dispatch_table(r: ModelResult, markdown: bool = True) -> str:
    header = ["compiler", "dispatch", "read MB", "written MB", "Mflop"]
    rows = [
        [c, d.name, f"{d.read_bytes / MB:.3f}", f"{d.write_bytes / MB:.3f}", f"{d.flops / 1e6:.1f}"]
        for c, run in r.runs.items()
        for d in run.costs.dispatches
    ]
    return _table(header, rows, markdown)


def to_json(results: list[ModelResult], gpu: str) -> dict:
    models = []
    for r in results:
        row = summary_row(r, gpu)
        row.update(
            source=r.source,
            target=r.target,
            modeled_seconds_by_gpu=r.modeled_seconds,
            wall_seconds={c: run.wall_seconds for c, run in r.runs.items()},
            dispatch_repeat=r.runs["tilefuse"].timing_repeat,
            reference=r.reference,
            tolerance=r.tolerance,
            max_error=r.max_error,
            max_difference=r.max_difference,
            per_dispatch={
                c: [
                    {
                        "name": d.name,
                        "read_bytes": d.read_bytes,
                        "write_bytes": d.write_bytes,
                        "flops": d.flops,
                        "tensor_core_flops": d.tensor_core_flops,
                    }
                    for d in run.costs.dispatches
                ]
                for c, run in r.runs.items()
            },
            kernels={c: [vars(k) for k in ks] for c, ks in r.kernels.items()},
            strategies=r.runs["tilefuse"].notes,
        )
        models.append(row)
    return {"gpu": gpu, "models": models}


def write_chart(results: list[ModelResult], gpu: str, path: Path) -> None:
    """Grouped bars: per model, each tilefuse/IREE ratio (1.0 = parity). The
    caller passes only models with ratios (`compared`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TilefuseError(
            "--report draws its chart with matplotlib: pip install -e '.[bench]'"
        ) from None
    rows = [summary_row(r, gpu) for r in results]
    series = {
        "HBM bytes": [_ratio(s["bytes"]["tilefuse"], s["bytes"]["iree"]) for s in rows],
        f"modeled time ({gpu})": [s["modeled_ratio"] for s in rows],
        "lavapipe wall time": [s["wall_ratio"] for s in rows],
        "compile time": [s["compile_ratio"] for s in rows],
    }
    series = {k: v for k, v in series.items() if any(x is not None for x in v)}
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows)), 4))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series.items()):
        xs = [j + i * width for j in range(len(rows))]
        ax.bar(xs, [v if v is not None else 0 for v in values], width, label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))])
    ax.set_xticklabels([s["model"] for s in rows], rotation=20, ha="right")
    ax.set_ylabel("tilefuse / IREE (lower is better)")
    ax.set_title(f"tilefuse vs IREE, target {results[0].target}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown_report(results: list[ModelResult], gpu: str, chart_name: str | None) -> str:
    target = results[0].target
    parts = [
        f"# tilefuse bench: target {target}",
        "",
        (
            "Ratios are tilefuse / IREE (lower is better). HBM bytes are what each dispatch "
            "loads and stores (from the executable sources); the floor is the model's inputs "
            "read once plus its outputs written once. Modeled time: per dispatch "
            f"max(bytes / bandwidth, flops / peak) + 1 us launch, on {gpu}. Lavapipe wall "
            "time is Vulkan on this machine's CPU: a proxy for trends, not GPU time."
        ),
        "",
        f"![ratios]({chart_name})" if chart_name else _no_chart(results),
        "",
        summary_table(results, gpu, markdown=True),
    ]
    rejected = baseline_lines(results)
    if rejected:
        parts += ["", "IREE's columns are `-` where plain iree-compile rejected the model:", ""]
        parts += [f"- {line}" for line in rejected]
    kernels = kernel_table(results, markdown=True)
    if kernels:
        parts += ["", "## Kernels (ptxas -v)", "", kernels]
    for r in results:
        parts += ["", f"## {r.name}", "", f"source `{shown(r.source)}`, numerics: {r.numerics}"]
        if r.baseline_error is not None:
            parts[-1] += f"; plain iree-compile rejected it: `{r.baseline_error}`"
        parts += ["", "tilefuse strategies:", ""]
        parts += [f"- `{line}`" for line in r.runs["tilefuse"].notes]
        parts += ["", dispatch_table(r)]
    return "\n".join(parts) + "\n"


# Past this many models a bar chart is unreadable; the table has every ratio.
CHART_MODELS = 30


def _no_chart(results: list[ModelResult]) -> str:
    if not compared(results):
        return "(No chart: plain iree-compile compiled none of the models, so there are no ratios.)"
    return f"(No chart past {CHART_MODELS} models.)"


def write_report(
    results: list[ModelResult],
    gpu: str,
    directory: Path,
    skipped: list[tuple[str, str]] = (),
) -> Path:
    """The markdown report (and its chart); `skipped` (model, why) are the
    models --keep-going left out, listed at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    chart = f"ratios-{results[0].target}.png"
    both = compared(results)  # a model plain IREE rejected has no ratios to draw
    if both and len(both) <= CHART_MODELS:
        write_chart(both, gpu, directory / chart)
    else:
        chart = None
    path = directory / f"bench-{results[0].target}.md"
    text = markdown_report(results, gpu, chart)
    if skipped:
        text += "\n## Skipped (a compiler could not compile them)\n\n"
        text += "".join(f"- {name}: {why}\n" for name, why in skipped)
    path.write_text(text)
    return path
