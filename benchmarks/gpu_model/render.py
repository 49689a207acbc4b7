"""Markdown tables of the cards and of the modelled times."""

from __future__ import annotations

from .. import gpu_resources
from . import cards as cards_module
from . import model

# The floors of ../shared/notes/gpu_performance.md section 4 (ms, H100; forward), by case id.
FLOORS = {"copy_u_sum_uniform": 0.15, "gspmm_sum": 0.11, "agg_mean": 0.11, "agg_max": 0.11, "gat": 0.12,
          "update_efeat": 0.26, "hg_basis": 0.12, "pool_sum": 0.014}


def table(header, rows, right=None) -> str:
    right = set(range(1, len(header))) if right is None else right
    return gpu_resources._table(header, rows, right)


def cards_section(cards: list[cards_module.Card], preamble: str) -> str:
    """The cards: a summary per kernel template, then every instantiation per file (folded)."""
    text = (f"{preamble}\n\nPer kernel: its *gather loop* (the SASS loop with the most global-load bytes per pass) "
            "on sm_90: instructions per element (per pass over the loop body, over the most loads at one source "
            "line, i.e. the unrolling), the widths of its global loads (bits per lane), the global loads in "
            "flight when the first is consumed (MLP) and the waits for loads per pass; over the whole kernel, "
            "calls of the 64-bit division subroutine (div64) and local-memory instructions; the lowest "
            "theoretical H100 occupancy (`benchmarks.gpu_resources`). Ranges over the instantiations.\n\n"
            + table(cards_module.SUMMARY_HEADER, cards_module.summary_rows(cards), {2, 3, 5, 6, 7, 8, 9}) + "\n")
    failures = cards_module.engine_failures(cards)
    declared = sorted({(k.file, k.name.split("<")[0], k.engine_floor) for k in cards if k.engine_floor})
    text += ("Engine kernels (`// gpu-model: engine mlp>=N`): "
             + (", ".join(f"`{n}` ({f}, MLP >= {m})" for f, n, m in declared) if declared else "none yet")
             + (f"; FAILING: {'; '.join(failures)}" if failures else "") + ".\n\n")
    for file in sorted({k.file for k in cards}):
        ks = [k for k in cards if k.file == file]
        text += (f"<details><summary>{file} ({len(ks)} kernels)</summary>\n\n"
                 + table(cards_module.CARD_HEADER, [cards_module.card_row(k) for k in ks],
                         {1, 2, 3, 4, 5, 8, 9, 10}) + "\n</details>\n\n")
    return text.rstrip() + "\n"


def ms(v: float) -> str:
    return "—" if v is None else f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 10 else f"{v:.1f}"


def pass_summary(pt: model.PassTime) -> dict:
    """The figures of one pass the tables print."""
    totals = pt.totals()
    attributed = {t: 0.0 for t in (*model.TERMS, "launch", "xla")}
    for lt in pt.launches:
        attributed[lt.binding] += max(lt.terms.values())
    attributed["launch"], attributed["xla"] = totals["launch"], totals["xla"]
    binding = max(attributed, key=attributed.get)
    heaviest = max(pt.launches, key=lambda lt: lt.ms, default=None)
    close = heaviest.close() if heaviest else []
    loads = [lt for lt in pt.launches if lt.load_requests]
    sectors = sum(lt.load_sectors for lt in loads) / max(1, sum(lt.load_requests for lt in loads))
    return dict(totals=totals, binding=binding, close=close, heaviest=heaviest, sectors_per_request=sectors,
                dram_mb=sum(lt.dram_bytes for lt in pt.launches) / 1e6,
                l2_mb=sum(lt.l2_bytes for lt in pt.launches) / 1e6,
                critical=max((lt.critical_path_ms for lt in pt.launches), default=0.0),
                instructions=sum(lt.instructions for lt in pt.launches))


MODEL_HEADER = ["op", "shape", "pass", "latency", "dram", "l2", "issue", "launches", "xla", "H100 ms", "H200 ms",
                "binding", "within 1.5x", "sectors/req", "DRAM MB", "L2 MB", "crit. path ms", "floor §4",
                "XLA H100 (measured)"]


def model_rows(names: dict, h100: dict, h200: dict, xla_measured: dict) -> list[list[str]]:
    rows = []
    for key, pt in h100.items():
        s = pass_summary(pt)
        t = s["totals"]
        case_id, pass_ = key
        floor = FLOORS.get(case_id) if pass_ == "forward" else None
        rows.append([names[case_id][0], names[case_id][1], pass_, ms(t["latency"]), ms(t["dram"]), ms(t["l2"]),
                     ms(t["issue"]), ms(t["launch"]), ms(t["xla"]), f"**{ms(pt.ms)}**", ms(h200[key].ms),
                     s["binding"], ", ".join(s["close"]) or "", f"{s['sectors_per_request']:.1f}",
                     f"{s['dram_mb']:.0f}", f"{s['l2_mb']:.0f}", ms(s["critical"]), ms(floor),
                     ms(xla_measured.get(key))])
    return rows
