"""A seeded generator of WebShop-format catalogs and instructions (`resrl make-webshop DIR`).

It writes WebShop's own files, which `resrl.tasks.webshop.data` reads exactly as it reads a user's
real WebShop data/ folder:

    items_shuffle.json     products (asin, name, full_description, small_description, pricing, images,
                           category, query, product_category, customization_options, ...)
    items_ins_v2.json      {asin: {"attributes", "instruction", "instruction_attributes"}}
    items_human_ins.json   {asin: [{"asin", "instruction", "instruction_attributes", "instruction_options",
                           "assignment_id", "worker_id"}]}: the goals (human-style, template-written here)
    resrl_webshop.json     the manifest: generator settings, seed, and each split's target products

What is generated (NOT WebShop's data, which is 1.18 M scraped Amazon products and 12,087
crowd-written instructions): products of fifteen product types in WebShop's five categories
(beauty, food, fashion, furniture, electronics), each a brand, two or three attributes of its
type (no attribute is shared by two types, so WebShop's lenient type reward cannot let a product
of one type win another type's goal), a subset of its type's option values and a price; instructions written from templates that
ask for one or two of a product's attributes and one or two of its option values. The split is by
target product: no test or dev instruction asks for a product a training instruction asks for, so
held-out goals cannot be solved by remembering a training goal's product.

The same seed and settings give byte-identical files.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

# product types: (category, query, product_category path, type noun phrase, attribute pool, options, price range)
_BY_CATEGORY = (
    ("beauty", "shampoo", "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos", "shampoo",
     ("sulfate free", "paraben free", "argan oil", "for dry hair", "tea tree"),
     {"size": ("8 fl oz", "16 fl oz", "32 fl oz"), "scent": ("lavender", "coconut", "unscented")}, (6, 34)),
    ("beauty", "face moisturizer", "Beauty & Personal Care › Skin Care › Face › Creams & Moisturizers",
     "face moisturizer", ("hyaluronic acid", "oil free", "fragrance free", "vitamin c", "spf 30"),
     {"size": ("1.7 oz", "2.5 oz", "4 oz")}, (9, 48)),
    ("beauty", "nail polish", "Beauty & Personal Care › Foot, Hand & Nail Care › Nail Polish", "nail polish",
     ("quick dry", "long lasting", "non toxic", "gel finish"),
     {"color": ("red", "pink", "nude", "black", "purple", "coral")}, (4, 19)),
    ("food", "coffee beans", "Grocery & Gourmet Food › Beverages › Coffee › Whole Coffee Beans", "coffee beans",
     ("organic", "dark roast", "fair trade", "low acid", "decaf"),
     {"size": ("12 ounce", "80 ounce", "2 pound")}, (9, 45)),
    ("food", "snack bars", "Grocery & Gourmet Food › Snacks & Sweets › Snack Food Bars", "snack bars",
     ("gluten free", "high protein", "low sugar", "vegan", "keto friendly"),
     {"flavor": ("chocolate", "peanut butter", "almond", "berry"), "count": ("6 count", "24 count")}, (8, 38)),
    ("food", "herbal tea", "Grocery & Gourmet Food › Beverages › Tea › Herbal", "herbal tea",
     ("caffeine free", "usda certified", "non gmo", "loose leaf"),
     {"flavor": ("chamomile", "peppermint", "ginger", "hibiscus"), "count": ("20 count", "100 count")}, (5, 26)),
    ("fashion", "hiking boots", "Clothing, Shoes & Jewelry › Men › Shoes › Outdoor › Hiking & Trekking",
     "hiking boots", ("waterproof", "non slip", "leather", "lightweight", "ankle support"),
     {"color": ("black", "brown", "gray", "olive"), "size": ("8", "9", "10", "11", "12")}, (39, 160)),
    ("fashion", "t-shirt", "Clothing, Shoes & Jewelry › Women › Clothing › Tops, Tees & Blouses › T-Shirts",
     "t-shirt", ("cotton", "short sleeve", "v neck", "machine wash", "relaxed fit"),
     {"color": ("white", "black", "navy", "green", "yellow"), "size": ("small", "medium", "large")}, (9, 35)),
    ("fashion", "winter hat", "Clothing, Shoes & Jewelry › Women › Accessories › Hats & Caps › Skullies & Beanies",
     "winter hat", ("wool", "fleece lined", "knit", "pom pom"),
     {"color": ("red", "gray", "blue", "beige", "black")}, (8, 32)),
    ("furniture", "ottoman bench", "Home & Kitchen › Furniture › Living Room Furniture › Ottomans",
     "ottoman bench", ("storage", "velvet", "tufted", "space saving", "easy assembly"),
     {"color": ("blue", "gray", "brown", "cream")}, (45, 180)),
    ("furniture", "bookshelf", "Home & Kitchen › Furniture › Home Office Furniture › Bookcases", "bookshelf",
     ("solid wood", "5 tier", "industrial", "anti tip", "wall mounted"),
     {"color": ("walnut", "white", "black", "oak")}, (35, 190)),
    ("furniture", "desk lamp", "Tools & Home Improvement › Lighting & Ceiling Fans › Lamps & Shades › Desk Lamps",
     "desk lamp", ("led", "dimmable", "usb charging", "eye caring", "touch control"),
     {"color": ("black", "white", "silver")}, (15, 70)),
    ("electronics", "bluetooth headphones", "Electronics › Headphones, Earbuds & Accessories › Headphones",
     "bluetooth headphones", ("noise cancelling", "wireless", "over ear", "long battery life", "foldable"),
     {"color": ("black", "white", "blue", "rose gold")}, (19, 150)),
    ("electronics", "usb microphone", "Musical Instruments › Microphones & Accessories › Microphones",
     "usb microphone", ("plug and play", "pop filter", "cardioid", "with stand"),
     {"color": ("black", "silver", "white")}, (19, 110)),
    ("electronics", "phone charger", "Cell Phones & Accessories › Chargers & Power Adapters › Wall Chargers",
     "phone charger", ("fast charging", "usb c", "dual port", "compact"),
     {"size": ("20w", "30w", "65w"), "color": ("white", "black")}, (9, 45)),
)
CATEGORIES = ("beauty", "food", "fashion", "furniture", "electronics")  # WebShop's five
# one type of each category first, then the second of each, ...: the first N types spread over the categories
TYPES = tuple(sorted(_BY_CATEGORY, key=lambda t: ([x for x in _BY_CATEGORY if x[0] == t[0]].index(t),
                                                  CATEGORIES.index(t[0]))))
BRANDS = ("Norvik", "Kelso", "Amberly", "Tovana", "Brisk", "Halden", "Quillo", "Marrow", "Zento", "Pellar",
          "Orrin", "Vesta", "Lumio", "Carrick", "Dunmore", "Feyla")
TEMPLATES = ("i'm looking for {attrs} {kind}{opts}", "i need {attrs} {kind}{opts}", "find me {attrs} {kind}{opts}",
             "i want to buy {attrs} {kind}{opts}", "looking for {attrs} {kind}{opts}")
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_FILLER = "KQWXYZJV"  # the fixed letters of asin_digits ASINs


@dataclass(frozen=True)
class GeneratorConfig:
    """What `generate` makes. products_per_type × 15 types products; instructions_per_product each."""

    products_per_type: int = 6
    instructions_per_product: int = 2
    test_fraction: float = 0.25   # of the products, the targets of the test instructions
    dev_fraction: float = 0.15
    price_range_fraction: float = 0.1  # products priced as a range "$a - $b"
    types: int = len(TYPES)       # the first `types` product types
    # every attribute of a product in its title (else 1..all of them; the rest only in its features and
    # description, which the item page's sub pages show)
    attributes_in_title: bool = False
    all_options: bool = False     # every product offers every option value of its type (else a subset)
    # ASINs: None = "B0" + 8 random letters and digits (real ASINs' look); k = "B0", a fixed run of
    # distinct letters, then a random k-digit number (still 10 characters: for a small character-level
    # model only the k digits differ; a run of padding zeros would make it count)
    asin_digits: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.types <= len(TYPES):
            raise ValueError(f"GeneratorConfig.types must be in [1, {len(TYPES)}]")
        if self.products_per_type < 2 or self.instructions_per_product < 1:
            raise ValueError("GeneratorConfig: products_per_type >= 2 and instructions_per_product >= 1")
        if not (0 <= self.test_fraction and 0 <= self.dev_fraction and self.test_fraction + self.dev_fraction < 1):
            raise ValueError("GeneratorConfig: test_fraction + dev_fraction must be in [0, 1)")
        if self.asin_digits is not None and (not 1 <= self.asin_digits <= 8
                                             or 10 ** self.asin_digits < 2 * self.products_per_type * self.types):
            raise ValueError("GeneratorConfig.asin_digits must be in [1, 8] with room for twice the products")


def _asin(rng: random.Random, taken: set, digits: int | None = None) -> str:
    while True:
        asin = "B0" + ("".join(rng.choice(_ALNUM) for _ in range(8)) if digits is None
                       else _FILLER[:8 - digits] + f"{rng.randrange(10 ** digits):0{digits}d}")
        if asin not in taken:
            taken.add(asin)
            return asin


def _title(words: str) -> str:
    return " ".join(w if any(c.isdigit() for c in w) else w.capitalize() for w in words.split())


def _product(rng: random.Random, spec: tuple, asin: str, config: GeneratorConfig) -> tuple[dict, list[str]]:
    category, query, path, kind, pool, options, (lo, hi) = spec
    brand = rng.choice(BRANDS)
    attrs = sorted(rng.sample(pool, rng.randint(2, min(3, len(pool)))), key=pool.index)
    in_title = attrs if config.attributes_in_title else attrs[:rng.randint(1, len(attrs))]
    name = f"{brand} {_title(' '.join(in_title))} {_title(kind)}"
    opts = {}
    for opt_name, values in options.items():
        k = len(values) if config.all_options else rng.randint(min(2, len(values)), len(values))
        opts[opt_name.capitalize()] = [{"is_selected": i == 0, "value": v.title() if not v[0].isdigit() else v,
                                        "image": None}
                                       for i, v in enumerate(sorted(rng.sample(values, k), key=values.index))]
    price = round(rng.uniform(lo, hi), 2)
    if rng.random() < config.price_range_fraction:
        pricing = f"${price:.2f} - ${round(price * rng.uniform(1.1, 1.5), 2):.2f}"
    else:
        pricing = f"${price:.2f}"
    features = [f"{_title(a)}: {brand}'s {kind} is {a}." for a in attrs] + [
        f"Satisfaction guaranteed: contact {brand} support with any question about your {kind}."]
    row = {
        "name": name, "full_description": f"The {brand} {kind}: {', '.join(attrs)}. Made for everyday use.",
        "pricing": pricing, "images": [f"https://example.invalid/img/{asin}.jpg"], "product_category": path,
        "average_rating": "", "small_description": features, "model": "",
        "customization_options": opts or None, "category": category, "query": query, "page": 1, "asin": asin,
        "brand": brand, "product_information": {}}
    return row, attrs


def _instruction(rng: random.Random, spec: tuple, attrs: list[str], row: dict) -> dict:
    kind = spec[3]
    asked = sorted(rng.sample(attrs, rng.randint(1, min(2, len(attrs)))), key=attrs.index)
    values = [c["value"].strip().replace("/", " | ").lower() for c in
              (rng.choice(v) for v in (row["customization_options"] or {}).values())]
    chosen = sorted(rng.sample(values, rng.randint(1, len(values)))) if values else []
    opts = ""
    if chosen:
        opts = " in " + " and ".join(chosen)
    text = rng.choice(TEMPLATES).format(attrs=" ".join(asked), kind=kind, opts=opts)
    return {"asin": row["asin"], "instruction": text, "instruction_attributes": asked,
            "instruction_options": chosen}


def _lines(obj) -> str:
    """Compact JSON, one list item or object entry per line (small files that still diff well)."""
    dumps = lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":"))  # noqa: E731
    if isinstance(obj, list):
        return "[\n" + ",\n".join(dumps(v) for v in obj) + "\n]\n"
    return "{\n" + ",\n".join(f"{dumps(k)}:{dumps(v)}" for k, v in obj.items()) + "\n}\n"


def generate(out: str | Path, seed: int = 0, config: GeneratorConfig | None = None) -> dict:
    """Write a catalog and its instructions to `out` (module docstring); returns the manifest."""
    config = config or GeneratorConfig()
    rng = random.Random(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    taken: set = set()
    products, attributes, human, targets = [], {}, {}, []
    for spec in TYPES[:config.types]:
        for _ in range(config.products_per_type):
            asin = _asin(rng, taken, config.asin_digits)
            row, attrs = _product(rng, spec, asin, config)
            products.append(row)
            first = _instruction(rng, spec, attrs, row)
            attributes[asin] = {"attributes": attrs, "instruction": first["instruction"],
                                "instruction_attributes": first["instruction_attributes"]}
            human[asin] = [{**_instruction(rng, spec, attrs, row), "assignment_id": f"GEN{seed}-{asin}-{j}",
                            "worker_id": "resrl-generator"} for j in range(config.instructions_per_product)]
            targets.append(asin)
    rng.shuffle(products)  # items_shuffle.json is shuffled
    order = list(targets)
    rng.shuffle(order)
    n_test = round(len(order) * config.test_fraction)
    n_dev = round(len(order) * config.dev_fraction)
    splits = {"test": sorted(order[:n_test]), "dev": sorted(order[n_test:n_test + n_dev]),
              "train": sorted(order[n_test + n_dev:])}
    manifest = {"generator": "resrl make-webshop", "seed": seed, "config": asdict(config),
                "products": len(products), "instructions": sum(len(v) for v in human.values()), "splits": splits,
                "note": "generated: NOT WebShop's data (template instructions over generated products)"}
    (out / "items_shuffle.json").write_text(_lines(products), encoding="utf-8")
    (out / "items_ins_v2.json").write_text(_lines(attributes), encoding="utf-8")
    (out / "items_human_ins.json").write_text(_lines(human), encoding="utf-8")
    (out / "resrl_webshop.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


__all__ = ["GeneratorConfig", "generate", "TYPES", "BRANDS"]
