"""``fleet cards`` (fleet/tools/cards.py): the catalogue as a table with the price table's prices, its filters and a
machine without a price. Every expectation is read from the catalogue and the price table, not from the output."""

from __future__ import annotations

import yaml

from fleet.model.billing.prices import PRICES_FILE, load_prices
from fleet.model.core.catalogue import load_catalogue
from fleet.report.costs import approximate
from fleet.tools.cards import UNKNOWN, card_offers, render_cards
from fleet.tools.cli import main


def available(catalogue):
    """(card, cloud, machine type, cards, accelerator type) of every machine the catalogue offers."""
    return [
        (card, cloud, m.machine_type, m.count, offer.accelerator_type)
        for card, acc in catalogue.accelerators.items()
        for cloud, offer in acc.offers.items()
        if offer.status == "available"
        for m in offer.sizes()
    ]


def test_every_machine_of_the_catalogue_with_its_prices_from_the_table():
    catalogue, prices = load_catalogue(), load_prices()
    offers = card_offers(catalogue, prices)
    assert [(o.card, o.cloud, o.machine_type, o.cards) for o in offers] == [a[:4] for a in available(catalogue)]
    for o, (_, cloud, machine, _, accelerator) in zip(offers, available(catalogue), strict=True):
        entry = prices.entries.get((cloud, machine, accelerator)) or prices.entries.get((cloud, machine, ""))
        assert (o.spot, o.on_demand) == ((entry.spot, entry.on_demand) if entry else (None, None)), machine
    text = render_cards(offers, prices)
    for o in offers:
        if o.spot is not None:
            assert any(o.machine_type in line and approximate(o.spot, 2) in line.split() for line in text.splitlines())


def test_a_machine_the_price_table_does_not_know_says_so(tmp_path):
    catalogue, shipped = load_catalogue(), load_prices()
    priced = [o for o in card_offers(catalogue, shipped) if o.spot is not None]
    dropped = priced[0]
    doc = yaml.safe_load(PRICES_FILE.read_text(encoding="utf-8"))
    doc["entries"] = [
        e for e in doc["entries"] if (e["cloud"], e["machine_type"]) != (dropped.cloud, dropped.machine_type)
    ]
    table = tmp_path / "prices.yaml"
    table.write_text(yaml.safe_dump(doc), encoding="utf-8")
    prices = load_prices(table)
    offers = card_offers(catalogue, prices, cloud=dropped.cloud, card=dropped.card)
    row = next(o for o in offers if o.machine_type == dropped.machine_type)
    assert row.spot is None and row.on_demand is None
    line = next(x for x in render_cards(offers, prices).splitlines() if f" {dropped.machine_type} " in x)
    assert line.split().count(UNKNOWN) == 2 and line.endswith("not in the price table")


def test_filters_by_cloud_and_card(capsys):
    catalogue = load_catalogue()
    card, cloud = available(catalogue)[0][:2]
    assert main(["cards", "--cloud", cloud, "--card", card]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in lines[1 : lines.index("")]]
    assert [r[3] for r in rows] == [a[2] for a in available(catalogue) if a[:2] == (card, cloud)]
    assert {(r[0], r[2]) for r in rows} == {(card, cloud)}


def test_retired_offers_only_when_asked():
    catalogue, prices = load_catalogue(), load_prices()
    retired = [
        (c, cloud) for c, a in catalogue.accelerators.items() for cloud, o in a.offers.items() if o.status == "retired"
    ]
    assert retired, "the catalogue has retired offers"
    card, cloud = retired[0]
    assert all(not o.retired for o in card_offers(catalogue, prices, cloud, card))
    shown = card_offers(catalogue, prices, cloud, card, retired=True)
    offer = catalogue.accelerators[card].offers[cloud]
    assert [o.retired for o in shown if o.retired] == [
        f"retired {offer.retired_on}, use {', '.join(offer.alternatives)}"
    ]


def test_an_unknown_card_is_a_located_error_with_a_suggestion(capsys):
    card = next(iter(load_catalogue().accelerators))
    assert main(["cards", "--card", card.upper() + "x"]) == 2
    err = capsys.readouterr().err
    assert "catalogue.yaml:1: --card: no card" in err and f"did you mean {card!r}?" in err
    assert "Traceback" not in err
