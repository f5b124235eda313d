"""``cards``: the catalogue's cards, their machines and prices per hour, as a table."""

from __future__ import annotations

import argparse

from fleet.tools.commands import EXIT_OK


def cmd_cards(args: argparse.Namespace) -> int:
    """Print the catalogue's cards, their machines and prices per hour (fleet/tools/cards.py)."""
    from fleet.model.billing.prices import load_prices
    from fleet.model.core.catalogue import load_catalogue
    from fleet.tools.cards import card_offers, render_cards

    prices = load_prices(args.prices)
    print(render_cards(card_offers(load_catalogue(), prices, args.cloud, args.card, args.retired), prices))
    return EXIT_OK
