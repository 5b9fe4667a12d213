"""`resrl make-webshop DIR [--seed S] [--products-per-type N] [--instructions-per-product K]`: a
generated WebShop-format catalog; `resrl webshop-ref --data SPEC`: the reference policies'
score and success on a goal set."""

from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "make-webshop", help="generate a WebShop-format catalog and instructions (items_shuffle.json, ...)",
        description="Write a generated catalog and template-written instructions in WebShop's own files "
                    "(items_shuffle.json, items_ins_v2.json, items_human_ins.json; NOT WebShop's data) plus "
                    "resrl_webshop.json (splits by target product) to DIR; use it as --data webshop:DIR:SPLIT. "
                    "The same seed gives byte-identical files.")
    p.add_argument("out", metavar="DIR")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--products-per-type", type=int, default=6, help="products of each of the 15 types (default 6)")
    p.add_argument("--instructions-per-product", type=int, default=2)
    p.add_argument("--types", type=int, default=15, help="use the first N product types (default all 15)")
    p.add_argument("--attributes-in-title", action="store_true",
                   help="every attribute in the product's title (else some only in its features and description)")
    p.add_argument("--all-options", action="store_true", help="every product offers all its type's option values")
    p.add_argument("--asin-digits", type=int, default=None,
                   help="ASINs 'B0', fixed letters, then a random N-digit number (default: 8 random letters/digits)")
    p.set_defaults(func=run)
    q = subparsers.add_parser(
        "webshop-ref", help="score and success of the scripted expert, a random policy and WebShop's rule "
                                  "baseline on WebShop-format goals",
        description="Plays each reference policy once per goal (webshop:DIR:SPLIT, webshop:SPLIT, webshop-small:SPLIT) "
                    "and prints score and success rate (x 100) in the paper's columns.")
    q.add_argument("--data", required=True, nargs="+")
    q.add_argument("--limit", type=int, default=None)
    q.add_argument("--max-steps", type=int, default=15)
    q.add_argument("--type-words", default=None, metavar="MODULE:FUNCTION",
                   help="the type reward's words of a title (default: the built-in stand-in)")
    q.add_argument("--seed", type=int, default=0, help="the random policy's seed")
    q.set_defaults(func=run_reference)


def run(args) -> int:
    from pathlib import Path

    from resrl.errors import InputError
    from resrl.tasks.webshop.generator import GeneratorConfig, generate

    try:
        config = GeneratorConfig(products_per_type=args.products_per_type,
                                 instructions_per_product=args.instructions_per_product, types=args.types,
                                 attributes_in_title=args.attributes_in_title, all_options=args.all_options,
                                 asin_digits=args.asin_digits)
    except ValueError as exc:
        raise InputError(f"make-webshop: {exc}") from None
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise InputError(f"make-webshop: {out} is not empty; use an empty or new directory")
    manifest = generate(out, seed=args.seed, config=config)
    print(f"{manifest['products']} products, {manifest['instructions']} instructions; splits by target product: "
          + ", ".join(f"{k} {len(v)}" for k, v in manifest["splits"].items()) + f"; wrote {out}")
    return 0


def run_reference(args) -> int:
    from resrl.tasks.webshop.data import load_goal_rows
    from resrl.tasks.webshop.env import WebShopSpec
    from resrl.tasks.webshop.evaluate import play, summary
    from resrl.tasks.webshop.policies import expert_action, random_policy, rule_action

    spec = WebShopSpec(max_steps=args.max_steps, type_words=args.type_words)
    print("| policy | data | goals | Score | Succ. (%) | mean steps |\n|---|---|---:|---:|---:|---:|")
    for data in args.data:
        rows = load_goal_rows(data, limit=args.limit)
        for name, policy in (("expert", expert_action), ("rule (search, first result, buy)", rule_action),
                             ("random", random_policy(args.seed))):
            s = summary(play(rows, policy, spec))
            print(f"| {name} | {data} | {len(rows)} | {s['score']:.1f} | {s['success']:.1f} | {s['mean_steps']:.1f} |")
    return 0
