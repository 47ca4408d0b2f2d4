"""The machine catalog: node-granular machines with the facts needed to map traces onto them.

A :class:`Machine` is a number of identical nodes. Traces record processors; ``procs_are_nodes`` says whether a
machine's logs count nodes instead of cores (the Theta SWF log does), which decides how processors map to nodes:
``nodes = procs`` if so, else ``ceil(procs / cores_per_node)``.

>>> get("theta").nodes
4392
>>> get("sdsc-sp2").cores_per_node
1
>>> parse("120x2").cores
240
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from hpcgym.errors import UnknownMachineError


@dataclass(frozen=True)
class Machine:
    """A node-granular machine.

    Attributes:
        name: catalog key, lower case.
        nodes: number of schedulable nodes.
        cores_per_node: cores (processors) per node.
        source: where the figures come from.
        procs_are_nodes: whether this machine's traces record nodes in their processor fields.
        description: a short human description.
    """

    name: str
    nodes: int
    cores_per_node: int = 1
    source: str = ""
    procs_are_nodes: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if self.nodes <= 0 or self.cores_per_node <= 0:
            raise ValueError(f"machine {self.name!r} needs positive nodes and cores_per_node")

    @property
    def cores(self) -> int:
        """Total cores."""
        return self.nodes * self.cores_per_node

    def procs_to_nodes(self, procs: int) -> int:
        """Whole nodes needed for ``procs`` processors as this machine's traces count them."""
        if procs <= 0:
            return procs
        return procs if self.procs_are_nodes else math.ceil(procs / self.cores_per_node)

    def scaled(self, nodes: int, name: str | None = None) -> Machine:
        """A copy with another node count (for tiling traces onto bigger machines)."""
        return replace(self, nodes=nodes, name=name or f"{self.name}-x{nodes}")


_PWA = "Parallel Workloads Archive log header (Feitelson et al., JPDC 74(10), 2014)"

CATALOG: dict[str, Machine] = {
    m.name: m
    for m in [
        Machine("theta", 4392, 64, "ALCF Theta (Cray XC40, KNL); ALCF job data", procs_are_nodes=True,
                description="ALCF Theta, 4,392 KNL nodes x 64 cores. Its SWF log records nodes."),
        Machine("trinity", 9408, 32, "LANL Trinity Haswell partition, as in the public OpenTrinity trace",
                description="LANL Trinity, 9,408 Haswell nodes x 32 cores. No full public trace is shipped."),
        Machine("mustang", 1600, 24, "LANL Mustang; Amvrosiadis et al., USENIX ATC 2018",
                description="LANL Mustang, 1,600 nodes x 24 cores."),
        Machine("mira", 49152, 16, "ALCF Mira (IBM BG/Q); ALCF job data",
                description="ALCF Mira, 49,152 BG/Q nodes x 16 cores."),
        Machine("thetagpu", 24, 8, "ALCF ThetaGPU (24 DGX A100 nodes, 8 GPUs each); ALCF job data",
                description="ALCF ThetaGPU, 24 DGX A100 nodes. Its logs' node_num equals gpu_num."),
        Machine("sdsc-sp2", 128, 1, _PWA + ": SDSC-SP2-1998-4.2-cln (MaxNodes 128, MaxProcs 128)",
                description="SDSC IBM SP2, 128 nodes."),
        Machine("hpc2n", 120, 2, _PWA + ": HPC2N-2002-2.2-cln (120 dual-CPU nodes, MaxProcs 240)",
                description="HPC2N Seth Linux cluster, 120 nodes x 2 CPUs."),
        Machine("cea-curie", 5544, 16, _PWA + ": CEA-Curie-2011-2.1-cln (MaxNodes 5544, MaxProcs 93312)",
                description="CEA Curie: 5,040 thin (16-core) + 360 fat + 144 hybrid nodes; mapped as 16-core "
                "nodes, so jobs above 88,704 processors do not fit."),
        Machine("lublin-256", 256, 1, "Lublin & Feitelson, JPDC 63(11), 2003; lublin_256.swf (MaxNodes 256)",
                description="The Lublin-Feitelson model's 256-node machine."),
        Machine("kth-sp2", 100, 1, _PWA + ": KTH-SP2-1996 (MaxProcs 100)", description="KTH IBM SP2, 100 nodes."),
        Machine("sdsc-par", 400, 1, _PWA + ": SDSC-Par-1996-3.1-cln (MaxNodes 400: 48 interactive + 352 batch; "
                "its 6 service and 10 I/O nodes run no jobs)",
                description="SDSC Intel Paragon, 400 compute nodes."),
        Machine("sdsc-blue", 144, 8, _PWA + ": SDSC-BLUE-2000 (MaxProcs 1152)",
                description="SDSC Blue Horizon, 144 nodes x 8 CPUs."),
        Machine("llnl-atlas", 1152, 8, _PWA + ": LLNL-Atlas-2006 (MaxProcs 9216)",
                description="LLNL Atlas, 1,152 nodes x 8 cores."),
        Machine("anl-intrepid", 40960, 4, _PWA + ": ANL-Intrepid-2009 (MaxProcs 163840)",
                description="ANL Intrepid (BG/P), 40,960 nodes x 4 cores."),
        Machine("ricc", 1024, 8, "Parallel Workloads Archive log page of RICC-2010-2 (1,024 nodes x 8 cores; the "
                "shipped file has no header)", description="RIKEN RICC, 1,024 nodes x 8."),
        Machine("lanl-cm5", 1024, 1, _PWA + ": LANL-CM5-1994-4.1-cln (MaxNodes 1024, MaxProcs 1024)",
                description="LANL Thinking Machines CM-5, 1,024 nodes."),
        Machine("llnl-thunder", 1002, 4, _PWA + ": LLNL-Thunder-2007-1.1-cln (MaxNodes 1002, MaxProcs 4008)",
                description="LLNL Thunder, 1,002 nodes x 4 CPUs."),
        Machine("metacentrum", 806, 1, "Parallel Workloads Archive log page of METACENTRUM-2009-2 (806 processors "
                "in several clusters; the shipped file has no header)",
                description="MetaCentrum, the Czech national grid: 806 processors in several clusters, mapped as "
                "one machine of 806 one-processor nodes."),
        Machine("nasa-ipsc", 128, 1, _PWA + ": NASA-iPSC-1993-3.1-cln (MaxNodes 128, MaxProcs 128)",
                description="NASA Ames Intel iPSC/860, 128 nodes."),
        Machine("osc-clust", 178, 1, _PWA + ": OSC-Clust-2000-3.1-cln (MaxNodes 57, MaxProcs 178: 32 quad- and "
                "25 dual-processor nodes)",
                description="OSC Linux cluster, 178 processors on 57 nodes of two sizes, mapped one node per "
                "processor."),
        Machine("sdsc-ds", 208, 8, _PWA + ": SDSC-DS-2004-2.1-cln (MaxProcs 1664 on 184 nodes of 8 and 32 "
                "processors; every job asks for a multiple of 8)",
                description="SDSC DataStar, 1,664 processors mapped as 208 nodes x 8 (171 p655 nodes of 8 and 7 "
                "p690 nodes of 32 processors, plus 6 interactive)."),
        Machine("sandia-ross", 1524, 1, _PWA + ": Sandia-Ross-2001-1.1-cln (MaxNodes 1524, MaxProcs 1524)",
                description="Sandia CPlant/Ross, 1,524 single-processor nodes."),
        Machine("unilu-gaia", 2004, 1, _PWA + ": UniLu-Gaia-2014-1 (MaxNodes 151, MaxProcs 2004, nodes of "
                "several sizes)",
                description="University of Luxembourg Gaia, 2,004 cores on 151 nodes of several sizes, mapped one "
                "node per core."),
    ]
}

ALIASES: dict[str, str] = {"sdsc_sp2": "sdsc-sp2", "curie": "cea-curie", "lublin256": "lublin-256",
                           "lublin": "lublin-256", "lanl-mustang": "mustang", "alcf-theta": "theta"}


def get(name: str | Machine) -> Machine:
    """Look a machine up by name (case-insensitive, with aliases); a :class:`Machine` passes through."""
    if isinstance(name, Machine):
        return name
    key = name.lower().replace("_", "-")
    key = ALIASES.get(key, key)
    if key not in CATALOG:
        raise UnknownMachineError(name, list(CATALOG) + list(ALIASES))
    return CATALOG[key]


_SPEC = re.compile(r"^\s*(\d+)\s*(?:[xX]\s*(\d+))?\s*$")
SPEC_HELP = "NAME|NODES[xCORES], e.g. theta, 128 or 120x2"


def parse(spec: str | Machine) -> Machine:
    """A machine from a command-line spec ``NAME|NODES[xCORES]``: a catalog name, or an ad-hoc machine.

    ``"theta"`` is the catalog entry; ``"128"`` is 128 one-core nodes; ``"120x2"`` is 120 nodes of 2 cores, so a
    job of ``p`` processors needs ``ceil(p / 2)`` nodes. A :class:`Machine` passes through.

    Raises:
        UnknownMachineError: an unknown name (with the closest names).
        ValueError: a number spec with zero nodes or cores, or a malformed one such as ``12x``.
    """
    if isinstance(spec, Machine):
        return spec
    text = str(spec).strip()
    m = _SPEC.match(text)
    if m:
        nodes, cores = int(m.group(1)), int(m.group(2) or 1)
        if nodes <= 0 or cores <= 0:
            raise ValueError(f"machine {spec!r}: nodes and cores must be positive ({SPEC_HELP})")
        return Machine(f"{nodes}x{cores}", nodes, cores, "command-line spec",
                       description=f"{nodes:,} nodes x {cores} cores (ad hoc)")
    if text[:1].isdigit():
        raise ValueError(f"machine {spec!r} is not a machine spec; expected {SPEC_HELP}")
    try:
        return get(text)
    except UnknownMachineError:
        raise UnknownMachineError(text, list(CATALOG) + list(ALIASES), hint=f"Or give {SPEC_HELP}.") from None


def register(machine: Machine, overwrite: bool = False) -> None:
    """Add a machine to the catalog."""
    if machine.name in CATALOG and not overwrite:
        raise ValueError(f"machine {machine.name!r} exists; pass overwrite=True to replace it")
    CATALOG[machine.name] = machine


def header_int(header: dict[str, Any], key: str) -> int | None:
    """A positive whole number from an SWF header field (``MaxNodes``, ``MaxProcs``, ...), else None.

    A field given on several lines counts when they all agree.
    """
    text = header.get(key, "")
    if isinstance(text, list):
        text = text[0] if len({str(v).strip() for v in text}) == 1 else ""
    try:
        value = int(str(text).split()[0])
    except (ValueError, IndexError):
        return None
    return value if value > 0 else None


def from_swf_header(header: dict[str, Any], name: str | None = None) -> Machine:
    """Build a machine from an SWF header's ``MaxNodes``/``MaxProcs`` fields.

    When both are given and ``MaxProcs`` is a multiple of ``MaxNodes`` the node has that many cores; otherwise a
    node is one processor, and the machine's ``description`` says so (:func:`mixed_node_note`).
    """
    max_nodes, max_procs = header_int(header, "MaxNodes"), header_int(header, "MaxProcs")
    if max_nodes is None and max_procs is None:
        raise ValueError("the SWF header has neither MaxNodes nor MaxProcs; pass machine= explicitly")
    label = name or str(header.get("Installation") or header.get("Computer") or "swf-machine").strip()
    if max_nodes and max_procs and max_procs % max_nodes == 0:
        cores = max_procs // max_nodes
        return Machine(label.lower(), max_nodes, cores, "SWF header")
    return Machine(label.lower(), max_procs or max_nodes, 1, "SWF header",
                   description=mixed_node_note(header) or "")


def mixed_node_note(header: dict[str, Any] | None) -> str | None:
    """A sentence when an SWF header's ``MaxProcs`` is not a multiple of ``MaxNodes`` (mixed node sizes), else None.

    :func:`from_swf_header` then maps one node per processor; the sentence says how to give the mapping instead.
    """
    header = header or {}
    max_nodes, max_procs = header_int(header, "MaxNodes"), header_int(header, "MaxProcs")
    if not (max_nodes and max_procs) or max_procs % max_nodes == 0:
        return None
    low = max(max_procs // max_nodes, 1)
    return (f"MaxProcs {max_procs} is not a multiple of MaxNodes {max_nodes} (mixed node sizes), so each processor "
            f"is mapped to one node of a {max_procs}-node machine; give the mapping with --machine NODESxCORES "
            f"(machine=), e.g. {max_nodes}x{low} or {max_nodes}x{low + 1}")
