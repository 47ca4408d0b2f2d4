"""The catalog of shipped logs: every data file has an entry, and each entry's claims hold on its file."""

import warnings

import pytest

from experiments import suite
from hpcgym import machines, traces

DATA_FILES = sorted(p.name for p in traces.DATA_DIR.iterdir() if p.is_file() and p.name != "CITATION.md")


def test_every_shipped_log_has_one_entry_and_every_entry_a_file():
    files = [info.file for info in traces.BUNDLED.values()]
    assert sorted(files) == DATA_FILES  # no file without an entry, none listed twice, none missing
    for name, info in traces.BUNDLED.items():
        assert machines.get(info.machine).name == info.machine, name
        assert info.citation and info.description, name
        assert info.kind in ("log", "model"), name


def test_the_citation_file_names_every_shipped_log():
    text = (traces.DATA_DIR / "CITATION.md").read_text()
    assert [f for f in DATA_FILES if f"`{f}`" not in text and not f.startswith("mustang_")] == []
    assert "mustang_*_week_fraction" in text


@pytest.mark.parametrize("name", list(traces.BUNDLED))
def test_what_the_catalog_says_a_log_records_holds(name):
    """Requested times, wait times and user ids: each where at least 90% of the jobs have one."""
    info = traces.BUNDLED[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jobs = traces.read(name, compact=True)
        wait = traces.load(name)["wait"]
    assert info.requested_times == bool(jobs["walltime_known"].mean() >= suite.REQUESTED_SHARE)
    assert info.wait_times == bool((wait >= 0).mean() >= suite.REQUESTED_SHARE)
    assert info.user_ids == bool((jobs["user"] >= 0).mean() >= suite.REQUESTED_SHARE and jobs["user"].nunique() > 1)


def test_machines_of_logs_without_a_header_come_from_the_catalog():
    """RICC's and METACENTRUM's copies have no header: the catalog's machine is the archive page's."""
    for name, nodes, cores in (("ricc", 1024, 8), ("metacentrum", 806, 1)):
        assert traces.read_header(traces.path_of(name)) == {}
        machine = machines.get(traces.BUNDLED[name].machine)
        assert (machine.nodes, machine.cores_per_node) == (nodes, cores)
