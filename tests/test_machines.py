import subprocess
import sys

import pytest

from hpcgym import machines
from hpcgym.errors import UnknownMachineError


@pytest.mark.parametrize("name, nodes, cores", [
    ("theta", 4392, 64), ("trinity", 9408, 32), ("mustang", 1600, 24), ("mira", 49152, 16),
    ("sdsc-sp2", 128, 1), ("hpc2n", 120, 2), ("cea-curie", 5544, 16), ("lublin-256", 256, 1),
])
def test_catalog_sizes(name, nodes, cores):
    m = machines.get(name)
    assert (m.nodes, m.cores_per_node) == (nodes, cores)
    assert m.source


def test_lookup_is_forgiving_and_suggests():
    assert machines.get("SDSC_SP2") is machines.get("sdsc-sp2")
    assert machines.get("curie").name == "cea-curie"
    with pytest.raises(UnknownMachineError, match="Did you mean 'theta'"):
        machines.get("thta")


def test_procs_to_nodes():
    assert machines.get("hpc2n").procs_to_nodes(3) == 2
    assert machines.get("theta").procs_to_nodes(128) == 128  # its SWF log counts nodes
    assert machines.get("mustang").procs_to_nodes(25) == 2


def test_machine_from_swf_header():
    m = machines.from_swf_header({"MaxNodes": "240", "MaxProcs": "480", "Installation": "X"})
    assert (m.nodes, m.cores_per_node, m.name) == (240, 2, "x")
    assert machines.from_swf_header({"MaxProcs": "100"}).nodes == 100
    with pytest.raises(ValueError, match="machine="):
        machines.from_swf_header({})


def test_import_is_light():
    code = "import sys, hpcgym, hpcgym.traces; print(sorted({'torch','sdv','stable_baselines3'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
