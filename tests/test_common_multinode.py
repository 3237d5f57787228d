"""common/multinode.py: how NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME select interfaces, and the collection commands both
multi-node scripts print."""

from __future__ import annotations

from common.multinode import COLLECTION_TEMPLATES, ifname_selection, socket_ifname_problems

INTERFACES = [
    {"name": "eth0", "operstate": "up"},
    {"name": "eth1", "operstate": "down"},
    {"name": "lo", "operstate": "unknown"},
]


def test_ifname_selection_reads_nccl_prefix_rules() -> None:
    names = ["eth0", "eth1", "ib0", "lo", "docker0"]
    assert ifname_selection("eth", names) == (["eth0", "eth1"], "prefixes eth")
    assert ifname_selection("^docker,lo", names)[0] == ["eth0", "eth1", "ib0"]
    assert ifname_selection("=eth0,ib0", names)[0] == ["eth0", "ib0"]
    assert ifname_selection("eth0", names, exact_only=True)[0] == ["eth0"]
    assert ifname_selection("eth", names, exact_only=True)[0] == []


def test_socket_ifname_problems_name_the_variable_and_why() -> None:
    def problems(**env: str) -> list:
        return socket_ifname_problems({"network": {"status": "ok", "interfaces": INTERFACES}, "env": env})

    assert problems() == [] and problems(NCCL_SOCKET_IFNAME="eth") == []
    assert problems(NCCL_SOCKET_IFNAME="=eth1") == [
        {
            "variable": "NCCL_SOCKET_IFNAME",
            "value": "=eth1",
            "detail": "selects only interfaces that are not up (eth1 down)",
        }
    ]
    [gloo] = problems(GLOO_SOCKET_IFNAME="eth")  # Gloo reads exact names
    assert gloo["detail"] == "selects no interface here (exact names eth; present: eth0, eth1, lo)"
    unknown = {"network": {"status": "unavailable", "interfaces": []}, "env": {"NCCL_SOCKET_IFNAME": "x"}}
    assert socket_ifname_problems(unknown) == []  # no interface list: nothing to judge


def test_collection_templates_show_every_way_to_collect() -> None:
    assert "srun --nodes=$SLURM_JOB_NUM_NODES --ntasks-per-node=1 --output=reports/%N.json" in COLLECTION_TEMPLATES
    assert "--label" in COLLECTION_TEMPLATES and "pdsh -w" in COLLECTION_TEMPLATES
    assert "--vllm-server FILE" in COLLECTION_TEMPLATES
