"""A product's facts, when the page is about one product: its name, brand, SKU, price, currency,
availability, rating and number of reviews, from the items the page declares (JSON-LD first).

A page is about one product when its main entity is a Product (``metadata.main_entity``) and
its items name no other product: a listing of many products answers none.
"""

from __future__ import annotations

from typing import Any

from fetch.html.facts import values
from fetch.html.facts.jsonld import types_of
from fetch.html.facts.metadata import main_entity

PRODUCT_TYPES = frozenset({"Product", "ProductGroup", "IndividualProduct", "ProductModel", "Vehicle", "Car"})


def product_facts(syntaxes: list[list[dict[str, Any]]]) -> dict[str, Any] | None:
    """The product the page is about, read from the first syntax's items that hold one."""
    for items in syntaxes:
        main = main_entity(items)
        if main is None or not PRODUCT_TYPES & set(types_of(main)):
            continue
        names = {values.text(item.get("name"), 200) for item in items if PRODUCT_TYPES & set(types_of(item))}
        if len(names - {None}) > 1:
            return None  # a page of several products is about none of them
        return _facts(main)
    return None


def _facts(item: dict[str, Any]) -> dict[str, Any]:
    offer = _offer(item)
    rating = values.first(item.get("aggregateRating"))
    rating = rating if isinstance(rating, dict) else {}
    facts = {
        "name": values.text(item.get("name"), values.TITLE_CHARS),
        "brand": values.name_of(values.first(item.get("brand")) or values.first(item.get("manufacturer"))),
        "sku": values.text(item.get("sku") or item.get("mpn"), values.NAME_CHARS),
        "price": _price(offer),
        "currency": values.currency(offer.get("priceCurrency") or _specification(offer).get("priceCurrency")),
        "availability": _availability(offer.get("availability")),
        "rating": values.number(rating.get("ratingValue")),
        "review_count": _count(rating.get("reviewCount") or rating.get("ratingCount")),
    }
    return {name: value for name, value in facts.items() if value is not None}


def _offer(item: dict[str, Any]) -> dict[str, Any]:
    """The product's first offer (an ``AggregateOffer``'s own, else its first), or its first
    variant's when a product group states none."""
    offers = item.get("offers")
    for offer in offers if isinstance(offers, list) else [offers]:
        if isinstance(offer, dict):
            if _price(offer) is None and isinstance(offer.get("offers"), list | dict):
                inner = values.first(offer["offers"])
                return inner if isinstance(inner, dict) else offer
            return offer
    variant = values.first(item.get("hasVariant"))
    if isinstance(variant, dict) and variant is not item:
        inner = values.first(variant.get("offers"))
        return inner if isinstance(inner, dict) else {}
    return {}


def _specification(offer: dict[str, Any]) -> dict[str, Any]:
    specification = values.first(offer.get("priceSpecification"))
    return specification if isinstance(specification, dict) else {}


def _price(offer: dict[str, Any]) -> int | float | None:
    for candidate in (offer.get("price"), offer.get("lowPrice"), _specification(offer).get("price")):
        price = values.number(candidate)
        if price is not None and price >= 0:
            return price
    return None


def _availability(value: Any) -> str | None:
    """``InStock``, ``OutOfStock``... without the vocabulary's prefix."""
    written = values.text(value, 100)
    return values.short_type(written).rsplit("/", 1)[-1] if written else None


def _count(value: Any) -> int | None:
    count = values.number(value)
    return int(count) if count is not None and count >= 0 else None
