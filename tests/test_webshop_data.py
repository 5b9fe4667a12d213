"""WebShop-format files (resrl.tasks.webshop.data): a folder in WebShop's own format loads as WebShop's
engine loads it, bad input is named (file, row, key), goals and splits follow WebShop, and the
generator writes the same format (byte-identical for a seed; the packaged catalog is its output)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from resrl.errors import DataError, InputError
from resrl.tasks.webshop.data import PACKAGED, PACKAGED_SETS, load_catalog, load_goal_rows, parse_spec

# two products as WebShop's items_shuffle.json holds them (fields of its scraped rows; values made up)
REAL_ROWS = [
    {"name": "Noise Cancelling USB Microphone, Plug and Play", "full_description": "A cardioid condenser mic.",
     "pricing": "$29.99 - $39.99", "images": ["https://example.invalid/a.jpg"], "product_category":
         "Musical Instruments › Microphones & Accessories › Microphones", "average_rating": 4.5,
     "small_description": "Plug and play USB", "model": "X1",
     "customization_options": {"Color": [{"is_selected": True, "url": "u", "value": "Black/Silver", "image": "i"},
                                         {"is_selected": False, "url": "u", "value": " White ", "image": None}],
                               "Style": None},
     "seller_id": "S", "seller_name": "n", "fulfilled_by_amazon": True, "fast_track_message": "", "aplus_present": "",
     "category": "electronics", "query": " USB Microphone ", "page": 3, "small_description_old": "",
     "asin": "B09QKP7XQL", "product_information": {}, "brand": "Acme", "brand_url": "", "list_price": "",
     "availability_quantity": 1, "availability_status": "", "total_reviews": 3, "total_answered_questions": 0},
    {"name": "Desk Lamp", "full_description": "", "pricing": "", "images": ["x"], "product_category": "Home › Lamps",
     "small_description": ["Dimmable", "LED"], "customization_options": None, "category": "furniture",
     "query": "desk lamp", "asin": "B000LAMP01"},
    {"name": "skipped: asin too long", "full_description": "", "pricing": "$1", "images": ["x"], "product_category": "",
     "small_description": [], "customization_options": None, "category": "", "query": "", "asin": "B000000000000"},
    {"name": "skipped: repeated asin", "full_description": "", "pricing": "$1", "images": ["x"], "product_category": "",
     "small_description": [], "customization_options": None, "category": "", "query": "", "asin": "B000LAMP01"},
]
ATTRS = {"B09QKP7XQL": {"attributes": ["noise cancelling", "plug and play"], "instruction": "i want a usb microphone",
                        "instruction_attributes": ["noise cancelling"]}}
HUMAN = {"B09QKP7XQL": [{"asin": "B09QKP7XQL", "instruction": "i need a noise cancelling usb microphone in white.",
                         "instruction_attributes": ["noise cancelling"], "instruction_options": ["white"],
                         "assignment_id": "A", "worker_id": "W"},
                        {"asin": "B09QKP7XQL", "instruction": "no attributes: skipped", "instruction_attributes": [],
                         "instruction_options": []}],
         "B000LAMP01": [{"asin": "B000LAMP01", "instruction": "a dimmable desk lamp", "instruction_attributes": ["dimmable"],
                         "instruction_options": []}]}


def _write(root: Path, products=REAL_ROWS, attrs=ATTRS, human=HUMAN, names=("items_shuffle_1000.json",
                                                                           "items_ins_v2_1000.json")) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / names[0]).write_text(json.dumps(products))
    if attrs is not None:
        (root / names[1]).write_text(json.dumps(attrs))
    if human is not None:
        (root / "items_human_ins.json").write_text(json.dumps(human))
    return root


def test_a_webshop_format_folder_loads_as_webshops_engine_loads_it(tmp_path):
    cat = load_catalog(_write(tmp_path / "d"))
    assert [p.asin for p in cat.products] == ["B09QKP7XQL", "B000LAMP01"]
    assert cat.skipped == {"bad_asin": 1, "duplicate": 1}
    mic, lamp = cat.products
    assert mic.pricing == (29.99, 39.99) and mic.price_tag == "$29.99 to $39.99" and 29.99 <= cat.prices[mic.asin] <= 39.99
    assert lamp.pricing == (100.0,) and lamp.price_tag == "$100.0" and cat.prices[lamp.asin] == 100.0
    assert mic.options == {"color": ("black | silver", "white")}  # lower-cased, '/' -> ' | ', null options dropped
    assert mic.bullet_points == ("Plug and play USB",) and lamp.bullet_points == ("Dimmable", "LED")
    assert mic.query == "usb microphone" and mic.attributes == ("noise cancelling", "plug and play")
    assert lamp.attributes == ("DUMMY_ATTR",)
    # human goals: the instruction without attributes skipped; price ceiling two to four tens above the price
    assert cat.goal_kind == "human" and len(cat.goals) == 2
    g = next(g for g in cat.goals if g.asin == mic.asin)
    assert g.instruction.startswith("i need a noise cancelling usb microphone in white, and price lower than ")
    assert g.price_upper in (50.0, 60.0, 70.0) and g.price_upper > cat.prices[mic.asin]
    assert g.options == ("white",) and g.name == mic.name and g.query == "usb microphone"
    lamp_goal = next(g for g in cat.goals if g.asin == lamp.asin)
    assert lamp_goal.price_upper in (120.0, 130.0, 140.0)
    # the same seed, the same catalog; WebShop's split ranges (test 0-499, ...) on a 2-goal catalog
    assert load_catalog(tmp_path / "d").goals == cat.goals
    assert cat.splits == {"test": [0, 1], "dev": [], "train": []}


def test_synthetic_goals_expand_option_combinations(tmp_path):
    cat = load_catalog(_write(tmp_path / "d", human=None))
    assert cat.goal_kind == "synthetic"
    texts = sorted(g.instruction.split(", and price")[0] for g in cat.goals)
    assert texts == ["i want a usb microphone with color: black | silver", "i want a usb microphone with color: white"]
    assert all(g.weight == 0.5 for g in cat.goals)  # one attribute shared by 2 goals: 1/2


@pytest.mark.parametrize("damage,message", [
    (lambda rows: rows[0].pop("name"), "row 0 (asin 'B09QKP7XQL'): missing key 'name'"),
    (lambda rows: rows[1].update(pricing="$abc"), "row 1 (asin 'B000LAMP01'): key 'pricing' is not a price"),
    (lambda rows: rows[1].update(customization_options={"Color": [{"image": "x"}]}),
     "row 1 (asin 'B000LAMP01'): customization_options['Color'][0] needs a string 'value'"),
    (lambda rows: rows[0].update(small_description=[1, 2]), "row 0 (asin 'B09QKP7XQL'): key 'small_description'"),
    (lambda rows: rows.__setitem__(1, "not a product"), "row 1: expected an object"),
])
def test_a_bad_product_row_is_named_by_file_row_and_key(tmp_path, damage, message):
    rows = json.loads(json.dumps(REAL_ROWS))
    damage(rows)
    root = _write(tmp_path / "d", products=rows)
    with pytest.raises(DataError) as err:
        load_catalog(root)
    assert "items_shuffle_1000.json" in str(err.value) and message in str(err.value)


def test_bad_goal_files_and_names_are_named(tmp_path, monkeypatch):
    human = json.loads(json.dumps(HUMAN))
    del human["B000LAMP01"][0]["instruction_options"]
    with pytest.raises(DataError, match=r"items_human_ins.json: asin 'B000LAMP01', instruction 0: missing key "
                                        r"'instruction_options'"):
        load_catalog(_write(tmp_path / "a", human=human))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "items_shuffle.json").write_text("[{")
    with pytest.raises(DataError, match="items_shuffle.json: not valid JSON"):
        load_catalog(tmp_path / "b")
    with pytest.raises(DataError, match="no WebShop product file"):
        load_catalog(tmp_path)
    with pytest.raises(InputError, match="unknown WebShop split 'nope'"):
        parse_spec("webshop-small:nope")
    monkeypatch.delenv("WEBSHOP_DATA", raising=False)
    with pytest.raises(DataError, match=r"\$WEBSHOP_DATA"):
        parse_spec("webshop:test")
    monkeypatch.setenv("WEBSHOP_DATA", str(_write(tmp_path / "c")))
    assert [r["goal"]["asin"] for r in load_goal_rows("webshop:test")] == [g.asin for g in load_catalog(tmp_path / "c").goals]


def test_the_generator_writes_webshop_format_byte_identical_per_seed(tmp_path):
    from resrl.tasks.webshop.generator import GeneratorConfig, generate

    cfg = GeneratorConfig(products_per_type=3, types=4)
    generate(tmp_path / "a", seed=5, config=cfg)
    generate(tmp_path / "b", seed=5, config=cfg)
    generate(tmp_path / "c", seed=6, config=cfg)
    names = ("items_shuffle.json", "items_ins_v2.json", "items_human_ins.json", "resrl_webshop.json")
    assert all((tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes() for n in names)
    assert (tmp_path / "a" / names[0]).read_bytes() != (tmp_path / "c" / names[0]).read_bytes()
    cat = load_catalog(tmp_path / "a")
    assert len(cat.products) == 12 and cat.goal_kind == "human" and len(cat.goals) == 24
    targets = {s: {cat.goals[i].asin for i in idx} for s, idx in cat.splits.items()}
    assert not (targets["train"] & targets["test"]) and not (targets["train"] & targets["dev"])
    assert sum(map(len, cat.splits.values())) == len(cat.goals)
    # every product row has the keys WebShop's load_products reads
    row = json.loads((tmp_path / "a" / names[0]).read_text())[0]
    assert {"asin", "name", "full_description", "small_description", "pricing", "images", "category", "query",
            "product_category", "customization_options"} <= set(row)


@pytest.mark.parametrize("name", sorted(PACKAGED_SETS))
def test_the_packaged_catalog_is_the_generators_output(tmp_path, name):
    from resrl.tasks.webshop.generator import GeneratorConfig, generate

    folder = PACKAGED_SETS[name]
    manifest = json.loads((folder / "resrl_webshop.json").read_text())
    generate(tmp_path, seed=manifest["seed"], config=GeneratorConfig(**manifest["config"]))
    for file in ("items_shuffle.json", "items_ins_v2.json", "items_human_ins.json", "resrl_webshop.json"):
        assert (tmp_path / file).read_bytes() == (folder / file).read_bytes(), (name, file)
    assert sum(f.stat().st_size for f in folder.iterdir()) < 600_000  # small: KBs, not a data set
    rows = load_goal_rows(f"{name}:test")  # its data set name loads, with its own catalog and label
    assert Path(rows[0]["catalog"]) == folder.resolve() and rows[0]["id"].startswith(f"{name}/test/")


def test_generated_option_values_never_fuzzy_match_each_other():
    """Two values of one option that the reward's fuzzy match cannot tell apart (e.g. '12 count' and
    '24 count', ratio 88) would let a wrong click score as right: the generator has none."""
    from resrl.tasks.webshop.generator import TYPES
    from resrl.tasks.webshop.reward import fuzzy_equal, normalize_color

    for _, query, _, _, pool, options, _ in TYPES:
        for name, values in options.items():
            for i, a in enumerate(values):
                for b in values[i + 1:]:
                    assert not fuzzy_equal(normalize_color(a), normalize_color(b)), (query, name, a, b)
    # attributes: none fuzzy-equal to another anywhere (also across types, whose products would then
    # match each other's goals: WebShop's type reward accepts a title sharing > 20 % of the goal's words)
    pools = [(t[1], a) for t in TYPES for a in t[4]]
    for i, (qa, a) in enumerate(pools):
        for qb, b in pools[i + 1:]:
            assert not fuzzy_equal(a, b), (qa, a, qb, b)


def test_goal_rows_are_self_contained_and_named():
    rows = load_goal_rows("webshop-small:test")
    assert rows[0]["id"].startswith("webshop-small/test/") and Path(rows[0]["catalog"]) == PACKAGED.resolve()
    assert len(load_goal_rows("webshop-small:test", limit=3)) == 3
    assert {r["split"] for r in load_goal_rows("webshop-small:eval")} == {"dev"}


def test_goal_order_is_webshops_seed_233_shuffle_of_file_order():
    """WebShop's SimServer builds goals product by product in file order, then random.seed(233);
    random.shuffle(goals): the same permutation here, so goal i (and the splits by index) are WebShop's."""
    import random

    products = json.loads((PACKAGED / "items_shuffle.json").read_text())
    human = json.loads((PACKAGED / "items_human_ins.json").read_text())
    order = [(p["asin"], e["instruction"].strip(".")) for p in products for e in human.get(p["asin"], [])
             if e["instruction_attributes"]]
    random.Random(233).shuffle(order)
    cat = load_catalog(PACKAGED)
    assert [(g.asin, g.instruction.split(", and price lower than")[0]) for g in cat.goals] == order


def test_wrong_types_and_deep_files_are_refused_naming_them(tmp_path):
    """issue 52: a string `attributes` was split into its characters; a catalog nested 100,000 levels deep
    raised an uncaught RecursionError."""
    from resrl.errors import DataError
    from resrl.tasks.webshop.data import Goal, load_catalog

    row = {"asin": "B0", "instruction": "i", "attributes": "waterproof", "options": [], "price_upper": 10,
           "query": "q", "category": "c", "product_category": "a › b", "name": "n"}
    with pytest.raises(DataError, match="row 3: not a WebShop goal .'attributes' must be a list of strings, got str"):
        Goal.from_dict(row, "row 3")
    with pytest.raises(DataError, match="'options' must be a list"):
        Goal.from_dict({**row, "attributes": ["x"], "options": "black"}, "row 3")
    assert Goal.from_dict({**row, "attributes": ["waterproof"]}, "row 3").attributes == ("waterproof",)
    root = tmp_path / "deep"
    root.mkdir()
    (root / "items_shuffle_1000.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DataError, match="items_shuffle_1000.json: JSON nested too deeply"):
        load_catalog(root)
