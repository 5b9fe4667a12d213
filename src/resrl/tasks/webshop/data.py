"""WebShop-format catalogs and goals: a user's real WebShop files and generated ones load the same way.

The files (WebShop's `data/` folder, github princeton-nlp/WebShop; field names as its
`web_agent_site/engine/engine.py:load_products` and `engine/goal.py` read them):

    items_shuffle.json      (or items_shuffle_1000.json) a JSON list of products: asin, name,
                            full_description, small_description (a list or a string: the features),
                            pricing ("$12.99" or "$10.00 - $20.00" style, "" or missing: $100),
                            images, category, query, product_category ("A › B › C"),
                            customization_options ({option name: [{"value": ..., "image": ...}]} or null);
                            other keys are ignored
    items_ins_v2.json       (or items_ins_v2_1000.json, optional) {asin: {"attributes": [...],
                            "instruction": text or null, "instruction_attributes": [...]}}: each
                            product's attributes, and the synthetic goals
    items_human_ins.json    (optional) {asin: [{"instruction", "instruction_attributes",
                            "instruction_options", ...}, ...]}: the human goals (the paper's)

Loading follows load_products: products whose asin is "nan" or longer than 10 characters, and
repeated asins, are skipped; option names are lower-cased, option values stripped, lower-cased,
"/" written " | "; a product without attributes gets ['DUMMY_ATTR']; its price is its single
price, or a uniform draw between the two of a range (seeded here; WebShop draws unseeded).
Goals follow get_human_goals / get_synthetic_goals: one per human instruction with attributes
(or, synthetic, one per option combination), the price ceiling two to four tens above the
product's price (", and price lower than X dollars" appended to the instruction), then shuffled
with seed 233 (WebShop's `random.seed(233)`). Splits, as WebShop's baseline_models/env.py:
test = goals 0-499, dev = 500-1499, train = the rest — unless the folder has a `resrl_webshop.json`
manifest (written by `resrl make-webshop`) naming each split's target products.

Bad input gives one `DataError` naming the file, the row (index and asin) and the key.

Data set names (`--data`, `data.train`):
    webshop:DIR:SPLIT       the WebShop-format files in DIR (SPLIT: train | dev | test; also eval = dev)
    webshop:SPLIT           the files in $WEBSHOP_DATA (WebShop's data/ folder)
    webshop-small:SPLIT     the small generated catalog shipped in this package (tests)
    webshop-medium:SPLIT    a larger generated catalog shipped in this package (the demo)
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path
from typing import Any

from resrl.errors import DataError, InputError

DATA_ENV = "WEBSHOP_DATA"
PRODUCT_FILES = ("items_shuffle.json", "items_shuffle_1000.json")
ATTRIBUTE_FILES = ("items_ins_v2.json", "items_ins_v2_1000.json")
HUMAN_FILE = "items_human_ins.json"
MANIFEST = "resrl_webshop.json"
SPLITS = ("train", "dev", "test")
SPLIT_ALIASES = {"eval": "dev", "valid": "dev"}
WEBSHOP_SPLITS = {"test": (0, 500), "dev": (500, 1500), "train": (1500, None)}  # baseline_models/env.py
PRICE_RANGE = [10.0 * i for i in range(1, 100)]  # goal.py
GOAL_SHUFFLE_SEED = 233  # goal order: WebShop's SimServer shuffles its goals after random.seed(233)
NO_CEILING = 1_000_000.0  # goal.py's price_upper when no ceiling is drawn
PRODUCT_KEYS = ("asin", "name", "full_description", "small_description", "images", "category", "query",
                "product_category", "customization_options")
# The generated catalogs shipped in the package, by data set name: their folder here. Each folder's
# manifest (resrl_webshop.json) records the generator's seed and config, from which
# tests/test_webshop_data.py regenerates it byte for byte.
PACKAGED_SETS = {
    "webshop-small": Path(__file__).resolve().parent / "packaged",           # 50 products, 200 goals
    "webshop-medium": Path(__file__).resolve().parent / "packaged_medium",   # 200 products, 800 goals
}
PACKAGED = PACKAGED_SETS["webshop-small"]


@dataclass(frozen=True)
class Product:
    """One product as load_products leaves it (the fields the pages and the reward read)."""

    asin: str
    name: str                 # the product's name = its Title
    description: str
    bullet_points: tuple[str, ...]
    pricing: tuple[float, ...]
    price_tag: str            # "$12.99" or "$10.0 to $20.0"
    options: dict             # option name (lower-case) -> tuple of values (lower-case)
    attributes: tuple[str, ...]
    category: str
    query: str
    product_category: str

    @property
    def title(self) -> str:
        return self.name


@dataclass(frozen=True)
class Goal:
    """One instruction as get_human_goals / get_synthetic_goals make it."""

    asin: str                 # the product the instruction was written for
    instruction: str          # the instruction shown (price clause included)
    attributes: tuple[str, ...]
    options: tuple[str, ...]  # option values (human goals' instruction_options)
    price_upper: float
    query: str
    category: str
    product_category: str
    name: str                 # the product's name (the type reward compares against it)
    weight: float = 1.0

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict, where: str = "goal") -> "Goal":
        if not isinstance(d, dict):
            raise DataError(f"{where}: not a WebShop goal (a {type(d).__name__}, not an object)")
        for key in ("attributes", "options"):  # a string would be split into its characters
            if key in d and not (isinstance(d[key], (list, tuple)) and all(isinstance(x, str) for x in d[key])):
                raise DataError(f"{where}: not a WebShop goal ({key!r} must be a list of strings, got "
                                f"{type(d[key]).__name__})")
        try:
            return cls(asin=str(d["asin"]), instruction=str(d["instruction"]),
                       attributes=tuple(str(a) for a in d["attributes"]), options=tuple(str(o) for o in d["options"]),
                       price_upper=float(d["price_upper"]), query=str(d["query"]), category=str(d["category"]),
                       product_category=str(d["product_category"]), name=str(d["name"]),
                       weight=float(d.get("weight", 1.0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{where}: not a WebShop goal ({type(exc).__name__}: {exc})") from None


@dataclass
class Catalog:
    """Products, their prices and the goals of one WebShop-format folder."""

    root: str
    products: list[Product]
    by_asin: dict[str, Product]
    prices: dict[str, float]
    goals: list[Goal]
    goal_kind: str                       # "human" | "synthetic"
    splits: dict[str, list[int]]         # split -> goal indices
    skipped: dict[str, int] = field(default_factory=dict)
    _search: Any = None

    def search_engine(self):
        """The BM25 index over the products (built on first use; resrl.tasks.webshop.search)."""
        if self._search is None:
            from resrl.tasks.webshop.search import ProductIndex

            self._search = ProductIndex(self.products)
        return self._search


# ---- reading files ------------------------------------------------------------------------------
def _read_json(path: Path, kind: type):
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise DataError(f"{path}: JSON nested too deeply; refused") from None
    if not isinstance(data, kind):
        raise DataError(f"{path}: expected a JSON {'list' if kind is list else 'object'}, got {type(data).__name__}")
    return data


def _text(value, path: Path, where: str, key: str) -> str:
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise DataError(f"{path}: {where}: key {key!r} must be a string, got {type(value).__name__}")
    return value


def _str_list(value, path: Path, where: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(f"{path}: {where}: key {key!r} must be a list of strings, got {str(value)[:80]!r}")
    return tuple(value)


def parse_pricing(text, path: Path, where: str) -> tuple[tuple[float, ...], str]:
    """load_products' pricing: every "$"-separated part read as a number; none -> $100.0."""
    if text is None or text == "" or text == []:
        return (100.0,), "$100.0"
    if not isinstance(text, str):
        raise DataError(f"{path}: {where}: key 'pricing' must be a string like \"$12.99\", got {str(text)[:80]!r}")
    parts = text.split("$")[1:]
    try:
        prices = [float(Decimal(re.sub(r"[^\d.]", "", p))) for p in parts]
    except (InvalidOperation, ValueError):
        raise DataError(f"{path}: {where}: key 'pricing' is not a price: {text[:80]!r}") from None
    if not prices:
        raise DataError(f"{path}: {where}: key 'pricing' has no '$' amount: {text[:80]!r}")
    if len(prices) == 1:
        return (prices[0],), f"${prices[0]}"
    return (prices[0], prices[1]), f"${prices[0]} to ${prices[1]}"


def _options(value, path: Path, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DataError(f"{path}: {where}: key 'customization_options' must be an object or null")
    out = {}
    for name, contents in value.items():
        if contents is None:
            continue
        if not isinstance(contents, list):
            raise DataError(f"{path}: {where}: customization_options[{name!r}] must be a list")
        values = []
        for j, c in enumerate(contents):
            if not isinstance(c, dict) or not isinstance(c.get("value"), str):
                raise DataError(f"{path}: {where}: customization_options[{name!r}][{j}] needs a string 'value'")
            values.append(c["value"].strip().replace("/", " | ").lower())
        out[str(name).lower()] = tuple(values)
    return out


def _find(root: Path, names: tuple[str, ...], required: bool) -> Path | None:
    for name in names:
        if (root / name).is_file():
            return root / name
    if required:
        raise DataError(f"{root}: no WebShop product file ({' or '.join(names)})")
    return None


def load_products(path: Path, attributes: dict | None, attr_path: Path | None) -> tuple[list[Product], dict]:
    """Products of an items_shuffle file (module docstring); returns (products, skipped counts)."""
    rows = _read_json(path, list)
    seen, products, skipped = set(), [], {"bad_asin": 0, "duplicate": 0}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataError(f"{path}: row {i}: expected an object, got {type(row).__name__}")
        asin = row.get("asin")
        where = f"row {i} (asin {asin!r})"
        missing = [k for k in PRODUCT_KEYS if k not in row]
        if missing:
            raise DataError(f"{path}: {where}: missing key {missing[0]!r}")
        if not isinstance(asin, str):
            raise DataError(f"{path}: {where}: key 'asin' must be a string")
        if asin == "nan" or len(asin) > 10:
            skipped["bad_asin"] += 1
            continue
        if asin in seen:
            skipped["duplicate"] += 1
            continue
        seen.add(asin)
        small = row["small_description"]
        bullets = tuple(small) if isinstance(small, list) else (_text(small, path, where, "small_description"),)
        if not all(isinstance(b, str) for b in bullets):
            raise DataError(f"{path}: {where}: key 'small_description' must be a string or a list of strings")
        pricing, tag = parse_pricing(row.get("pricing"), path, where)
        attrs = ("DUMMY_ATTR",)
        if attributes is not None and asin in attributes:
            entry = attributes[asin]
            if not isinstance(entry, dict):
                raise DataError(f"{attr_path}: asin {asin!r}: expected an object")
            if "attributes" in entry:
                attrs = _str_list(entry["attributes"], attr_path, f"asin {asin!r}", "attributes")
        products.append(Product(
            asin=asin, name=_text(row["name"], path, where, "name"),
            description=_text(row["full_description"], path, where, "full_description"), bullet_points=bullets,
            pricing=pricing, price_tag=tag, options=_options(row["customization_options"], path, where),
            attributes=attrs, category=_text(row["category"], path, where, "category"),
            query=_text(row["query"], path, where, "query").lower().strip(),
            product_category=_text(row["product_category"], path, where, "product_category")))
    if not products:
        raise DataError(f"{path}: no usable products")
    return products, skipped


def product_prices(products: list[Product], rng: random.Random) -> dict[str, float]:
    """engine.py's generate_product_prices: one price per product (a range draws uniformly)."""
    return {p.asin: (p.pricing[0] if len(p.pricing) == 1 else rng.uniform(*p.pricing[:2])) for p in products}


def _ceiling(price: float, rng: random.Random) -> tuple[float, str]:
    above = [p for p in PRICE_RANGE if p > price][:4]
    if len(above) >= 2:
        _, upper = sorted(rng.sample(above, 2))
        return upper, f", and price lower than {upper:.2f} dollars"
    return NO_CEILING, ""


def human_goals(products: list[Product], prices: dict, human: dict, path: Path, rng: random.Random) -> list[Goal]:
    """get_human_goals: one goal per instruction with attributes, in product-file order."""
    goals = []
    for p in products:
        entries = human.get(p.asin)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise DataError(f"{path}: asin {p.asin!r}: expected a list of instructions")
        for j, e in enumerate(entries):
            where = f"asin {p.asin!r}, instruction {j}"
            if not isinstance(e, dict):
                raise DataError(f"{path}: {where}: expected an object")
            for key in ("instruction", "instruction_attributes", "instruction_options"):
                if key not in e:
                    raise DataError(f"{path}: {where}: missing key {key!r}")
            attrs = _str_list(e["instruction_attributes"], path, where, "instruction_attributes")
            opts = _str_list(e["instruction_options"], path, where, "instruction_options")
            if not isinstance(e["instruction"], str):
                raise DataError(f"{path}: {where}: key 'instruction' must be a string")
            if not attrs:
                continue  # goal.py skips instructions without attributes
            upper, text = _ceiling(prices[p.asin], rng)
            goals.append(Goal(asin=p.asin, instruction=e["instruction"].strip(".") + text, attributes=attrs,
                              options=opts, price_upper=upper, query=p.query, category=p.category,
                              product_category=p.product_category, name=p.name))
    return goals


def synthetic_goals(products: list[Product], prices: dict, attributes: dict, path: Path,
                    rng: random.Random) -> list[Goal]:
    """get_synthetic_goals: per product with an instruction, one goal per combination of its
    options ("... with color: red, and size: large"), weighted by its attributes' rarity."""
    import itertools

    goals, count = [], {}
    for p in products:
        entry = attributes.get(p.asin)
        if not isinstance(entry, dict) or not entry.get("instruction"):
            continue
        attrs = _str_list(entry.get("instruction_attributes"), path, f"asin {p.asin!r}", "instruction_attributes")
        if not attrs:
            raise DataError(f"{path}: asin {p.asin!r}: an instruction needs instruction_attributes")
        upper, price_text = _ceiling(prices[p.asin], rng)
        names = sorted(p.options)
        for combo in itertools.product(*(p.options[n] for n in names)):
            chosen = dict(zip(names, combo))
            opt_text = ", and ".join(f"{k}: {v}" for k, v in chosen.items())
            goals.append(Goal(asin=p.asin, instruction=f"{entry['instruction']}{' with ' + opt_text if opt_text else ''}"
                                                        f"{price_text}", attributes=attrs, options=tuple(combo),
                              price_upper=upper, query=p.query, category=p.category,
                              product_category=p.product_category, name=p.name))
            for a in attrs:
                count[a] = count.get(a, 0) + 1
    return [Goal(**{**g.__dict__, "weight": sum(1.0 / count[a] for a in g.attributes) / len(g.attributes)})
            for g in goals]


def _splits(root: Path, goals: list[Goal]) -> dict[str, list[int]]:
    manifest = root / MANIFEST
    if manifest.is_file():
        data = _read_json(manifest, dict)
        splits = data.get("splits")
        if not isinstance(splits, dict) or set(splits) - set(SPLITS):
            raise DataError(f"{manifest}: key 'splits' must map some of {list(SPLITS)} to target asins")
        out = {}
        for name, asins in splits.items():
            wanted = set(_str_list(asins, manifest, f"split {name!r}", "splits"))
            out[name] = [i for i, g in enumerate(goals) if g.asin in wanted]
        return {s: out.get(s, []) for s in SPLITS}
    n = len(goals)
    return {s: list(range(min(a, n), n if b is None else min(b, n))) for s, (a, b) in WEBSHOP_SPLITS.items()}


def load_catalog(root: str | Path, goals: str = "auto", seed: int = 0) -> Catalog:
    """The catalog and goals of a WebShop-format folder (module docstring). goals: "human" (the
    paper's, items_human_ins.json), "synthetic" (items_ins_v2's), "auto" (human when the file is
    there). `seed` draws the prices of price ranges and the goals' price ceilings."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise DataError(f"{root}: not a directory (a WebShop data/ folder, or one `resrl make-webshop` wrote)")
    return _load(str(root.resolve()), goals, int(seed), _stamp(root))


def _stamp(root: Path) -> tuple:
    return tuple((n, (root / n).stat().st_mtime_ns) for n in PRODUCT_FILES + ATTRIBUTE_FILES + (HUMAN_FILE, MANIFEST)
                 if (root / n).is_file())


@lru_cache(maxsize=4)
def _load(root_s: str, goals: str, seed: int, stamp: tuple) -> Catalog:
    root = Path(root_s)
    product_file = _find(root, PRODUCT_FILES, True)
    attr_file = _find(root, ATTRIBUTE_FILES, False)
    attributes = _read_json(attr_file, dict) if attr_file else None
    products, skipped = load_products(product_file, attributes, attr_file)
    rng = random.Random(seed)
    prices = product_prices(products, rng)
    human_file = root / HUMAN_FILE
    kind = goals if goals != "auto" else ("human" if human_file.is_file() else "synthetic")
    if kind == "human":
        if not human_file.is_file():
            raise DataError(f"{root}: human goals need {HUMAN_FILE}")
        made = human_goals(products, prices, _read_json(human_file, dict), human_file, rng)
    elif kind == "synthetic":
        if attributes is None:
            raise DataError(f"{root}: synthetic goals need {' or '.join(ATTRIBUTE_FILES)}")
        made = synthetic_goals(products, prices, attributes, attr_file, rng)
    else:
        raise InputError(f"webshop goals must be 'human', 'synthetic' or 'auto', got {goals!r}")
    if not made:
        raise DataError(f"{root}: no goals ({kind} goals need instructions with attributes)")
    random.Random(GOAL_SHUFFLE_SEED).shuffle(made)
    by_asin = {p.asin: p for p in products}
    return Catalog(root=root_s, products=products, by_asin=by_asin, prices=prices, goals=made, goal_kind=kind,
                   splits=_splits(root, made), skipped=skipped)


# ---- data set names -----------------------------------------------------------------------------
SPEC_PREFIXES = ("webshop:", *(f"{name}:" for name in PACKAGED_SETS))


def is_webshop_spec(spec) -> bool:
    return str(spec).startswith(SPEC_PREFIXES)


def _split(name: str, spec: str) -> str:
    split = SPLIT_ALIASES.get(name, name)
    if split not in SPLITS:
        raise InputError(f"data set {spec!r}: unknown WebShop split {name!r} (splits: {list(SPLITS)})")
    return split


def parse_spec(spec: str) -> tuple[Path, str, str]:
    """'webshop:DIR:SPLIT' / 'webshop:SPLIT' / 'webshop-small:SPLIT' (a PACKAGED_SETS name) -> (folder,
    split, label)."""
    spec = str(spec)
    name, _, rest = spec.partition(":")
    if name in PACKAGED_SETS:
        return PACKAGED_SETS[name], _split(rest, spec), name
    if not spec.startswith("webshop:"):
        raise InputError(f"not a WebShop data set: {spec!r} (webshop:DIR:SPLIT, webshop:SPLIT or "
                         f"{' / '.join(n + ':SPLIT' for n in PACKAGED_SETS)})")
    rest = spec[len("webshop:"):]
    if ":" in rest:
        directory, name = rest.rsplit(":", 1)
        return Path(directory).expanduser(), _split(name, spec), "webshop"
    split = _split(rest, spec)
    data = os.environ.get(DATA_ENV)
    if not data:
        raise DataError(f"data set {spec!r} needs WebShop's data files: set ${DATA_ENV} to WebShop's data/ folder "
                        f"(items_shuffle.json, items_ins_v2.json, items_human_ins.json), or name a folder "
                        f"(webshop:DIR:{split}); a small generated one ships as webshop-small:{split}")
    return Path(data).expanduser(), split, "webshop"


def dataset_label(spec: str) -> str:
    """The key of a data set in reports: 'webshop-small:test' -> 'webshop-small_test'."""
    _, split, label = parse_spec(spec)
    return f"{label}_{split}"


def load_goal_rows(spec: str, limit: int | None = None, seed: int = 0) -> list[dict]:
    """Task rows of a data set: {"id", "catalog" (absolute folder), "goal_index", "goal" (Goal as a
    dict), "split", "dataset", "seed"}; the first `limit` if given."""
    root, split, label = parse_spec(spec)
    catalog = load_catalog(root, seed=seed)
    indices = catalog.splits[split]
    if limit is not None:
        indices = indices[:limit]
    if not indices:
        raise DataError(f"data set {spec!r}: the {split} split of {root} has no goals")
    return [{"id": f"{label}/{split}/{i}", "catalog": catalog.root, "goal_index": i,
             "goal": catalog.goals[i].as_dict(), "split": split, "dataset": str(spec), "seed": seed}
            for i in indices]


__all__ = ["Product", "Goal", "Catalog", "load_catalog", "load_products", "parse_pricing", "product_prices",
           "human_goals", "synthetic_goals", "is_webshop_spec", "parse_spec", "dataset_label", "load_goal_rows",
           "DATA_ENV", "SPLITS", "PACKAGED", "PACKAGED_SETS", "SPEC_PREFIXES", "PRICE_RANGE", "NO_CEILING", "MANIFEST"]
