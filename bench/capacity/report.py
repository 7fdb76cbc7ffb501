"""The capacity benchmark's Markdown report: per-instance figures, sizes per document (marginal:
the growth between half the corpus and all of it, so fixed costs drop out) with the factor to
100M documents, HNSW builds with their extrapolation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.capacity.hnsw import HnswBuild, extrapolate_seconds, growth_exponent
from bench.capacity.instances import Meter
from bench.capacity.sizes import Sizes
from bench.harness.inprocess import md_table
from bench.harness.runenv import machine_lines

TARGET_DOCUMENTS = 100_000_000
MIB = 2**20
GIB = 2**30


@dataclass
class Capacity:
    """Everything one run measured."""

    command: str
    dim: int
    loads: list[str] = field(default_factory=list)  # load averages seen along the run
    half: Sizes | None = None
    full: Sizes | None = None
    write_before: dict[str, int] = field(default_factory=dict)
    write_after: dict[str, int] = field(default_factory=dict)
    write_counts: dict[str, int] = field(default_factory=dict)
    meters: list[Meter] = field(default_factory=list)
    hnsw: list[HnswBuild] = field(default_factory=list)


def _gib(n: float) -> str:
    return f"{n / GIB:,.1f}"


def instances_table(meters: Sequence[Meter]) -> str:
    """One row per measured component: per unit, and units/s of one busy core and of one
    sequential instance (wall)."""
    rows = []
    for m in meters:
        wall, cpu, pg = m.per_unit_ms()
        rows.append((m.what, f"{m.units:,}", f"{wall:.2f}", f"{cpu:.2f}", f"{pg:.2f}",
                     f"{1000 / wall:,.0f}" if wall else "-",
                     f"{1000 / cpu:,.0f}" if cpu else "-", f"{1000 / pg:,.0f}" if pg else "-"))
    return md_table(("component: unit", "N", "wall ms/unit", "own CPU ms/unit",
                     "Postgres CPU ms/unit", "units/s, one sequential instance (wall)",
                     "units/s per own core", "units/s per Postgres core"), rows)


def _delta(half: Sizes, full: Sizes) -> tuple[int, int]:
    """(documents, rows) added between the two points; a row is a document or a part."""
    docs = full.counts["documents"] - half.counts["documents"]
    parts = full.counts["parts"] - half.counts["parts"]
    return max(docs, 1), max(docs + parts, 1)


def sizes_table(half: Sizes, full: Sizes) -> tuple[str, float]:
    """Postgres relations that hold at least 0.5% of the growth, per document and per 100M
    documents; (table, bytes per document)."""
    docs, rows_added = _delta(half, full)
    before = half.relation_bytes()
    grown = [(r, r.bytes - before.get(r.name, 0)) for r in full.relations]
    total = sum(g for _, g in grown)
    rows = []
    shown = 0
    for r, g in sorted(grown, key=lambda x: -x[1]):
        if g < 0.005 * total:
            continue
        shown += g
        rows.append((r.name, r.kind, f"{r.bytes / MIB:,.1f}", f"{g / docs:,.0f}",
                     f"{g / rows_added:,.0f}", _gib(g / docs * TARGET_DOCUMENTS)))
    rest = total - shown
    rows.append(("everything else", "-", "-", f"{rest / docs:,.0f}",
                 f"{rest / rows_added:,.0f}", _gib(rest / docs * TARGET_DOCUMENTS)))
    all_bytes = sum(r.bytes for r in full.relations)
    rows.append(("**Postgres, all relations**", "-", f"{all_bytes / MIB:,.1f}",
                 f"{total / docs:,.0f}", f"{total / rows_added:,.0f}",
                 _gib(total / docs * TARGET_DOCUMENTS)))
    return md_table(("relation", "kind", "MiB at the end", "bytes per document",
                     "bytes per row", "GiB per 100M documents"), rows), total / docs


def other_stores_table(half: Sizes, full: Sizes) -> str:
    """Tantivy, FalkorDB and the PPR snapshot, marginal per unit."""
    docs, rows_added = _delta(half, full)
    tantivy = full.tantivy_bytes - half.tantivy_bytes
    rows: list[tuple[str, ...]] = [
        ("Tantivy index (DATA_DIR/lexical), each API host's replica",
         f"{full.tantivy_bytes / MIB:,.1f} MiB",
         f"{tantivy / docs:,.0f} B/document, {tantivy / rows_added:,.0f} B/row",
         _gib(tantivy / docs * TARGET_DOCUMENTS))]
    f0, f1 = half.falkordb, full.falkordb
    grown = f1.get("used_memory", 0) - f0.get("used_memory", 0)
    keys = (f1.get("nodes", 0) + f1.get("edges", 0)) - (f0.get("nodes", 0) + f0.get("edges", 0))
    rows.append((f"FalkorDB used_memory ({f1.get('nodes', 0):,} nodes, "
                 f"{f1.get('edges', 0):,} edges)", f"{f1.get('used_memory', 0) / MIB:,.1f} MiB",
                 f"{grown / docs:,.0f} B/document, {grown / max(keys, 1):,.0f} B per node or "
                 "edge", _gib(grown / docs * TARGET_DOCUMENTS)))
    usage = f1.get("graph_memory")
    if usage:
        rows.append(("FalkorDB GRAPH.MEMORY USAGE, MB", "; ".join(
            f"{k} {v}" for k, v in usage.items()), "-", "-"))
    s0, s1 = half.snapshot, full.snapshot
    pairs = max(s1.pairs - s0.pairs, 1)
    rows.append((f"PPR snapshot of the namespace ({s1.entities:,} entities, {s1.rows:,} rows, "
                 f"{s1.pairs:,} mentions, {s1.links:,} edges)",
                 f"{s1.allocated / MIB:,.1f} MiB allocated (the bound's estimate "
                 f"{s1.estimated / MIB:,.1f})",
                 f"{(s1.allocated - s0.allocated) / pairs * 1e5 / MIB:,.1f} MiB per 100k "
                 f"mentions (estimate {(s1.estimated - s0.estimated) / pairs * 1e5 / MIB:,.1f})",
                 "-"))
    return md_table(("store", "at the end", "per unit (growth between the two points)",
                     "GiB per 100M documents"), rows)


def write_table(c: Capacity) -> str:
    """What the write path added per SciFact document (apply and embed), largest first."""
    docs = max(c.write_counts.get("documents", 0), 1)
    delta = [(name, b - c.write_before.get(name, 0)) for name, b in c.write_after.items()]
    total = sum(b for _, b in delta)
    rows = [(name, f"{b / docs:,.0f}") for name, b in sorted(delta, key=lambda x: -x[1])
            if b >= 0.01 * total]
    rows.append(("**all relations**", f"{total / docs:,.0f}"))
    return md_table(("relation", "bytes per document"), rows)


def hnsw_table(builds: Sequence[HnswBuild]) -> str:
    """The builds, their growth against the first, and the extrapolations to 10M and 100M."""
    if not builds:
        return "(no HNSW builds: --hnsw none)"
    first, last = builds[0], builds[-1]
    base = first.cpu_s / first.vectors
    rows = [(f"{b.vectors:,}", f"{b.wall_s:.1f} s", f"{b.cpu_s:.1f} s",
             f"{1e6 * b.cpu_s / b.vectors:,.0f}", f"{(b.cpu_s / b.vectors) / base:.2f}x",
             f"{b.index_bytes / MIB:,.1f} MiB", f"{b.index_bytes / b.vectors:,.0f}",
             "yes" if b.spilled else "no") for b in builds]
    for target in (10_000_000, 100_000_000):
        low, high = extrapolate_seconds(list(builds), target)
        rows.append((f"{target:,} (extrapolated)", "-",
                     f"{low / 3600:,.1f}-{high / 3600:,.1f} h",
                     f"{1e6 * low / target:,.0f}-{1e6 * high / target:,.0f}",
                     f"{(low / target) / base:.2f}-{(high / target) / base:.2f}x",
                     f"{last.index_bytes / last.vectors * target / GIB:,.1f} GiB",
                     f"{last.index_bytes / last.vectors:,.0f}", "-"))
    return md_table(("vectors", "wall", "backend CPU", "CPU us/vector",
                     "CPU/vector vs first", "index", "bytes/vector",
                     "outgrew maintenance_work_mem"), rows) + (
        f"\n\nGrowth exponent a of CPU ~ n^a between the two largest builds: "
        f"{growth_exponent(list(builds)):.2f}; the extrapolations are n log n fitted on the "
        f"largest build (low) and n^a (high), one core, the graph in memory.")


def report(c: Capacity, elapsed: float) -> str:
    """The whole report."""
    assert c.half is not None and c.full is not None
    n0, n1 = c.half.counts, c.full.counts
    docs, rows_added = _delta(c.half, c.full)
    sizes, per_doc = sizes_table(c.half, c.full)
    wc = c.write_counts
    lines = ["# Capacity: one instance of each component, and what the data occupy", "",
             *machine_lines(), f"- load average (1 min) along the run: {', '.join(c.loads)}",
             f"- command: `{c.command}`", f"- run time: {elapsed / 60:.1f} min", "",
             "A diagnostic without a target: the figures docs/scaling.md is built from. "
             "`units/s per own core` is 1 / (the instance's CPU per unit): what one fully busy "
             "core does; Postgres's CPU per unit is apart (the primary's share). Sizes are "
             "bytes, independent of the load.", "",
             "## Per instance", "",
             instances_table(c.meters), "",
             "## Postgres, per relation", "",
             f"A corpus loaded in bulk as `bench.query` loads it (COPY, indexes rebuilt, "
             f"entity layer by the heuristic extractor, {c.dim}-dim vectors), measured at "
             f"{n0['documents']:,} documents ({n0['parts']:,} parts) and at "
             f"{n1['documents']:,} ({n1['parts']:,} parts, {n1['links']:,} links, "
             f"{n1['entities']:,} entities, {n1['mentions']:,} mentions); per document and per "
             f"row is the growth between the two ({docs:,} documents, {rows_added:,} rows: "
             f"{rows_added / docs:.1f} rows per document, the document's own row and its "
             f"parts). 100M documents: the growth per document x 100M (factor "
             f"x{TARGET_DOCUMENTS / docs:,.0f} of the growth measured).", "", sizes, "",
             f"Postgres grows {per_doc:,.0f} bytes per document of this corpus.", "",
             "## Other stores", "", other_stores_table(c.half, c.full), "",
             f"## What the write path adds per document ({wc.get('documents', 0):,} SciFact "
             f"put events applied and embedded on the empty database: "
             f"{wc.get('parts', 0) / max(wc.get('documents', 1), 1):.1f} parts per document; "
             "relation bytes after minus before)", "", write_table(c), "",
             "## pgvector HNSW builds", "",
             f"Random unit vectors, {c.dim} dimensions, the parameters of migration 0033, "
             "maintenance_work_mem 1GB, no parallel workers (one backend: its CPU is the "
             "build's).", "", hnsw_table(c.hnsw)]
    return "\n".join(lines)
