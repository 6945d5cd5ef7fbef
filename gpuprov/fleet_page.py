"""The fleet figures as one self-contained HTML page (`gpuprov fleet --html FILE`): tables,
and plots drawn by matplotlib as inline SVG, so the page needs no network to be read."""

from __future__ import annotations

import html
import io
from datetime import UTC, datetime

from gpuprov.fleet import Figures

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f2f2f2; }
td.n { text-align: right; }
figure { margin: 0 0 1.5em; }
"""


def _when(stamp: float | None) -> str:
    return "the start" if stamp is None else datetime.fromtimestamp(stamp, UTC).strftime(
        "%Y-%m-%d %H:%M UTC")


def _svg(labels: list[str], values: list[float], xlabel: str, title: str,
         counts: bool = False) -> str:
    """A horizontal bar chart as an SVG element (`counts`: whole numbers on its axis)."""
    import matplotlib
    matplotlib.use("Agg")   # no display: draw to memory
    from matplotlib import pyplot as plt
    height = max(1.6, 0.4 * len(labels) + 1)
    fig, ax = plt.subplots(figsize=(7, height))
    ax.barh(labels[::-1], values[::-1], color="#4878a8")
    ax.set_xlabel(xlabel)
    if counts:
        ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title(title)
    fig.tight_layout()
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None})   # the same figures, the same page
    plt.close(fig)
    text = out.getvalue()
    return text[text.index("<svg"):]


def _table(head: list[str], rows: list[list[object]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f'<td class="n">{v}</td>' if isinstance(v, int | float)
                         else f"<td>{html.escape(str('' if v is None else v))}</td>"
                         for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def render(figures: Figures) -> str:
    data = figures.as_dict()
    parts = [f"<h1>Fleet figures</h1><p>{data['validations']} validations from "
             f"{_when(figures.since)} to {_when(figures.until)}; {data['rejections']} "
             "rejected.</p>", "<h2>Intake yield (first validation)</h2>"]
    intake = data["intake"]
    if intake:
        names = [", ".join(f"{k}={v}" for k, v in i["group"].items()) for i in intake]
        parts.append(_svg(names, [i["yield_pct"] for i in intake], "accepted at first "
                          "validation (%)", "Intake yield"))
        parts.append(_table(["group", "nodes", "accepted", "yield %", "rejected"],
                            [[n, i["nodes"], i["accepted"], i["yield_pct"],
                              ", ".join(i["rejected_nodes"])] for n, i in zip(
                                  names, intake, strict=True)]))
    else:
        parts.append("<p>No node had its first validation in this window.</p>")
    parts.append("<h2>Rejections by check and by action</h2>")
    checks = data["rejections_by_check"]
    if checks:
        parts.append(_svg(list(checks), list(checks.values()), "rejections",
                          "Rejections by check", counts=True))
    parts.append(_table(["check", "rejections"], [[k, v] for k, v in checks.items()]))
    parts.append(_table(["action", "rejections"],
                        [[k, v] for k, v in data["rejections_by_action"].items()]))
    offenders = data["repeat_offenders"]
    share = offenders["share_pct"]
    parts.append(f"<h2>Repeat offenders</h2><p>{len(offenders['nodes'])} node(s) with "
                 f"{offenders['rejections_at_least']} hardware rejections or more within "
                 f"{offenders['within_days']:g} days since their latest repair "
                 f"({html.escape(', '.join(offenders['nodes']) or 'none')}): "
                 f"{offenders['rejections']} rejection(s)"
                 + (f", {share}% of all" if share is not None else "") + ".</p>")
    head = ["name", "node", "validations", "incidents", "mean h between", "mean h to repair"]
    for title, rows in (("Nodes", data["nodes"]), ("GPUs (by serial)", data["gpus"])):
        parts.append(f"<h2>{title}</h2>")
        parts.append(_table(head, [[r["name"], r["node"], r["validations"], r["incidents"],
                                    r["mtbi_h"], r["ttr_h"]] for r in rows]))
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpuprov "
            f"fleet figures</title><style>{_STYLE}</style></head><body>"
            + "".join(parts) + "</body></html>\n")
