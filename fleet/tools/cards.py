"""``python -m fleet cards``: the accelerator catalogue as a table, one row per machine that carries a card, with its
hourly price from the price table (like SkyPilot's ``sky show-gpus``).

The machines are the catalogue's (fleet/model/core/catalogue.yaml: each offer's machine and its other sizes); the prices
the price table's (fleet/model/prices.yaml), dated observations for one region each. A machine the table does
not price says so; a retired offer is shown only with ``--retired``, with its date and alternatives.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from fleet.model.billing.prices import PriceTable
from fleet.model.core.catalogue import CATALOGUE_FILE, Catalogue
from fleet.model.core.errors import InputError, Problem
from fleet.report.costs import approximate

UNKNOWN = "unknown"


@dataclass(frozen=True)
class CardOffer:
    """One machine of one cloud carrying a card, with its prices per machine-hour (None: not in the table)."""

    card: str
    model: str
    memory_gib: int
    cloud: str
    machine_type: str
    cards: int
    spot: float | None = None
    on_demand: float | None = None
    region: str = ""  # the region the price was read for
    retired: str = ""  # ``retired 2024-05-01, use t4, l4`` for a retired offer


def card_offers(
    catalogue: Catalogue,
    prices: PriceTable,
    cloud: str | None = None,
    card: str | None = None,
    retired: bool = False,
) -> list[CardOffer]:
    """Every machine of every card the catalogue offers (on ``cloud``, of ``card`` when given), card by card in
    catalogue order, each offer's own machine first; with ``retired``, retired offers too."""
    if card is not None and card not in catalogue.accelerators:
        near = difflib.get_close_matches(card.lower(), catalogue.accelerators, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        known = ", ".join(catalogue.accelerators)
        message = f"no card {card!r} in the catalogue: {hint}(known: {known})"
        raise InputError([Problem(str(CATALOGUE_FILE), 1, "--card", message)])
    out = []
    for name, acc in catalogue.accelerators.items():
        if card is not None and name != card:
            continue
        for where, offer in acc.offers.items():
            if cloud is not None and where != cloud:
                continue
            if offer.status == "retired":
                if retired:
                    alternatives = ", ".join(offer.alternatives)
                    when = f"retired {offer.retired_on}, use {alternatives}"
                    out.append(CardOffer(name, acc.model, acc.memory_gib, where, "-", 0, retired=when))
                continue
            for machine in offer.sizes():
                entry = prices.lookup(where, machine.machine_type, offer.accelerator_type)
                out.append(
                    CardOffer(
                        name,
                        acc.model,
                        acc.memory_gib,
                        where,
                        machine.machine_type,
                        machine.count,
                        spot=entry.spot if entry else None,
                        on_demand=entry.on_demand if entry else None,
                        region=entry.region if entry else "",
                    )
                )
    return out


def _price(value: float | None) -> str:
    return UNKNOWN if value is None else approximate(value, 2)


def render_cards(offers: list[CardOffer], prices: PriceTable) -> str:
    """The offers as a text table, with a line on where the prices come from and how many are missing."""
    if not offers:
        return "no card matches"
    currency = prices.currency
    header = ["card", "memory (GiB)", "cloud", "machine type", "cards", f"spot ({currency}/h)"]
    rows = [[*header, f"on-demand ({currency}/h)", "price for"]]
    for o in offers:
        if o.retired:
            rows.append([o.card, str(o.memory_gib), o.cloud, "-", "-", o.retired, "", ""])
            continue
        where = o.region or "not in the price table"
        rows.append([o.card, str(o.memory_gib), o.cloud, o.machine_type, str(o.cards), _price(o.spot)])
        rows[-1] += [_price(o.on_demand), where]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    priced = [o for o in offers if not o.retired]
    missing = sum(1 for o in priced if o.spot is None)
    lines.append("")
    lines.append(
        f"{len(priced)} machine(s); prices per machine-hour from {prices.file} (approximate, dated per entry, for the "
        f"region shown); {missing} without a spot price."
    )
    return "\n".join(lines)
