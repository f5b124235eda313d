"""The price table (fleet/model/prices.yaml) and the cost arithmetic (fleet/report/costs.py)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from fleet.model.core.catalogue import load_catalogue
from fleet.model.core.errors import InputError
from fleet.model.loader import load_fleet
from fleet.report.costs import (
    PRICES_FILE,
    Machine,
    PriceEntry,
    approximate,
    cost_per_result,
    load_prices,
    machine_for,
    machine_share,
    per_result,
)
from fleet.report.model import CardRow

# --- the shipped table ----------------------------------------------------------------------------------


def catalogue_machines() -> set[tuple[str, str, str]]:
    """(cloud, machine type, accelerator type) of every machine the catalogue offers: each available offer's machine
    and the sweeps' other sizes, and each cloud's system pool machine."""
    catalogue = load_catalogue()
    offered = {
        (cloud, machine.machine_type, offer.accelerator_type)
        for acc in catalogue.accelerators.values()
        for cloud, offer in acc.offers.items()
        if offer.status == "available"
        for machine in offer.sizes()  # the pool's machine and the sweeps' other sizes
    }
    system = {(cloud, f.system_machine_type, "") for cloud, f in catalogue.clouds.items() if f.system_machine_type}
    return offered | system


def test_every_entry_is_dated_sourced_and_a_machine_of_the_catalogue() -> None:
    table = load_prices()
    assert table.currency == "USD" and table.entries
    offered = catalogue_machines()
    for key, entry in table.entries.items():
        assert entry.source.strip() and isinstance(entry.as_of, datetime.date), key
        assert entry.as_of <= datetime.date.today(), key
        assert key in offered or (key[0], key[1], "") in {(c, m, "") for c, m, _ in offered}, key


def test_every_machine_of_the_catalogue_has_an_entry() -> None:
    """A machine the table lacks shows as "price unknown" in the plan and the cards: every machine the catalogue offers
    has an entry, with ``null`` prices where the source has none (a site's own flavors), never a missing row."""
    table = load_prices()
    missing = sorted(key for key in catalogue_machines() if table.lookup(*key) is None)
    assert not missing, f"machines of catalogue.yaml without an entry in prices.yaml: {missing}"


def test_spot_prices_claim_no_more_than_two_significant_digits() -> None:
    for entry in load_prices().entries.values():
        if entry.spot is not None:
            assert float(approximate(entry.spot, 2).replace(",", "")) == entry.spot, entry.key


def test_lookup_falls_back_to_the_machine_without_accelerator() -> None:
    table = load_prices()
    g4dn = table.lookup("aws", "g4dn.xlarge")
    assert g4dn is not None and g4dn.spot == 0.19 and g4dn.region == "us-east-1"
    assert table.lookup("aws", "g4dn.xlarge", "ignored-accelerator") is g4dn
    l4 = table.lookup("gcp", "g2-standard-4", "nvidia-l4")
    assert l4 is not None and l4.accelerator_type == "nvidia-l4" and l4.spot is not None
    a10 = table.lookup("azure", "Standard_NC8ads_A10_v4")
    assert a10 is not None and a10.spot is None  # listed, but the source has no eastus price: none, not a guess
    assert table.lookup("aws", "no-such-machine") is None
    assert g4dn.as_of.isoformat() == "2026-11-22"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(text, encoding="utf-8")
    return path


ENTRY = "  - {cloud: aws, machine_type: g4dn.xlarge, region: r, spot: 0.2, as_of: 2026-01-01, source: s}\n"


def test_a_machine_priced_twice_is_an_error_naming_the_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "currency: USD\nentries:\n" + ENTRY + ENTRY)
    with pytest.raises(InputError) as caught:
        load_prices(path)
    assert str(caught.value) == f"{path}:2: entries: aws/g4dn.xlarge is priced twice"


@pytest.mark.parametrize(
    ("entry", "key", "message"),
    [
        (ENTRY.replace("spot: 0.2", "spot: -1"), "entries[0].spot", "expected 0 or more, not -1"),
        (ENTRY.replace(", source: s", ""), "entries[0].source", "required key is missing"),
        (ENTRY.replace("as_of: 2026-01-01", "as_of: last week"), "entries[0].as_of", "date"),
        (ENTRY.replace("region: r", "region: r, price: 1"), "entries[0].price", "unknown key"),
    ],
)
def test_bad_entries_are_located(tmp_path: Path, entry: str, key: str, message: str) -> None:
    path = _write(tmp_path, "currency: USD\nentries:\n" + entry)
    with pytest.raises(InputError) as caught:
        load_prices(path)
    (problem,) = caught.value.problems
    assert problem.file == str(path) and problem.line == 3 and problem.path == key
    assert message in problem.message


# --- machines -------------------------------------------------------------------------------------------


def test_the_machine_comes_from_the_policy_then_the_catalogue(tmp_path: Path) -> None:
    """On a fleet of the test's own (not the shipped one, which a team replaces): its on-demand L4 pool as the policy
    has it, a cluster it does not have from the catalogue."""
    policy = tmp_path / "fleet.yaml"
    policy.write_text(
        "clusters:\n  openstack:\n    site:\n      region: cern\n      central: true\n      gpus: [v100]\n"
        "  gcp:\n    gke-od:\n      zone: us-central1-a\n      gpus: {l4: {spot: false}}\n",
        encoding="utf-8",
    )
    fleet = load_fleet(policy, tmp_path)
    assert machine_for("site", "openstack", "v100", fleet) == Machine("openstack", "g1.xlarge", "", 1, True)
    gke = machine_for("gke-od", "gcp", "l4", fleet)
    assert gke == Machine("gcp", "g2-standard-4", "nvidia-l4", 1, False)  # the policy's pool: not spot
    assert machine_for("gke-elsewhere", "gcp", "l4", fleet) == Machine("gcp", "g2-standard-4", "nvidia-l4", 1, True)
    # A cluster the policy does not know: the catalogue's offer for the cloud.
    assert machine_for("elsewhere", "aws", "a100", fleet) == Machine("aws", "p4d.24xlarge", "", 8, True)
    assert machine_for("elsewhere", "azure", "v100", None) is None  # retired there
    assert machine_for("elsewhere", "aws", "no-such-card", None) is None
    assert gke is not None and gke.label == "g2-standard-4 + nvidia-l4"


# --- arithmetic -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("gpus_per_pod", "gpus", "share"), [(1, 1, 1.0), (1, 8, 0.125), (2, 8, 0.25), (2, 1, 1.0)])
def test_machine_share(gpus_per_pod: int, gpus: int, share: float) -> None:
    assert machine_share(gpus_per_pod, gpus) == share


def test_machine_share_needs_gpus() -> None:
    with pytest.raises(ValueError):
        machine_share(0, 8)


def test_per_result() -> None:
    assert per_result(120.0, 4) == 30.0
    for total, results in ((None, 4), (120.0, None), (120.0, 0), (float("nan"), 3)):
        assert per_result(total, results) is None


def test_cost_per_result() -> None:
    assert cost_per_result(0.19, 1.0, 3600) == pytest.approx(0.19)
    assert cost_per_result(9.8, 0.125, 1800) == pytest.approx(9.8 / 8 / 2)  # one GPU of eight, half an hour
    assert cost_per_result(None, 1.0, 60) is None
    assert cost_per_result(0.19, 1.0, None) is None
    with pytest.raises(ValueError):
        cost_per_result(0.19, 0.0, 60)


def test_a_report_row_prices_spot_or_on_demand_pools() -> None:
    price = PriceEntry(
        cloud="aws", machine_type="m", region="r", spot=0.2, on_demand=0.5, as_of=datetime.date(2026, 1, 1), source="s"
    )
    spot = CardRow("c", "aws", "t4", 1.0, runs=10, observed_seconds=3600, machine=Machine("aws", "m", "", 2, True))
    spot.price, spot.share = price, machine_share(1, 2)
    assert spot.seconds_per_result == 360
    assert spot.cost_per_result == pytest.approx(0.2 * 0.5 * 0.1)
    on_demand = CardRow(
        "c", "aws", "t4", 1.0, runs=10, observed_seconds=3600, machine=Machine("aws", "m", "", 1, False)
    )
    on_demand.price = price
    assert on_demand.cost_per_result == pytest.approx(0.5 * 0.1)
    unpriced = CardRow("c", "aws", "t4", 1.0, runs=10, observed_seconds=3600, machine=None)
    assert unpriced.cost_per_result is None and unpriced.energy_per_result is None


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [(0.19, 2, "0.19"), (0.000053, 2, "0.000053"), (1234.5, 2, "1,200"), (68255670, 4, "68,260,000"), (0, 2, "0")],
)
def test_approximate(value: float, digits: int, text: str) -> None:
    assert approximate(value, digits) == text


def test_the_shipped_table_is_the_default() -> None:
    assert PRICES_FILE.name == "prices.yaml" and PRICES_FILE.parent.name == "model"


def test_a_shared_pool_counts_a_pod_against_the_slices_of_its_machine(tmp_path: Path) -> None:
    policy = tmp_path / "fleet.yaml"
    policy.write_text(
        "clusters:\n  gcp:\n    gke-sh:\n      zone: us-central1-a\n      central: true\n"
        "      gpus: {t4: {sharing: {time_slicing: 4}}, a100: {sharing: {mig: 1g.5gb}}}\n",
        encoding="utf-8",
    )
    fleet = load_fleet(policy, tmp_path)
    t4 = machine_for("gke-sh", "gcp", "t4", fleet)
    a100 = machine_for("gke-sh", "gcp", "a100", fleet)
    assert t4 is not None and a100 is not None
    assert (t4.gpus, t4.label) == (4, "n1-standard-4 + nvidia-tesla-t4 (time-slicing-4)")
    assert (a100.gpus, a100.sharing) == (7, "mig-1g.5gb")  # seven 1g.5gb instances of one A100 40GB
    assert machine_share(1, t4.gpus) == 0.25  # a pod pays for its quarter of the card
