"""The shopping site as text: WebShop's pages, what can be clicked on each, and where a click leads.

Written from WebShop's text environment (`web_agent_site/envs/web_agent_text_env.py`: SimServer,
SimBrowser, get_available_actions, convert_html_to_text) and its page templates
(`web_agent_site/templates/*.html`); github princeton-nlp/WebShop, read, not copied.

Pages and their visible texts (observation_mode "text": the texts joined by " [SEP] ", as
WebShop's simple mode; "text_rich": buttons as [button] X [button_], the options and products
already clicked as [clicked button] X [clicked button_], one per line, "You have clicked X." first):

    search    WebShop · Instruction: · <instruction> · Search                       (the search bar)
    results   Instruction: · <instruction> · Back to Search · Page P (Total results: N) · < Prev (P > 1)
              · Next > · then per product on this page: <ASIN> · <title> · <price>
    item      Instruction: · <instruction> · Back to Search · < Prev · per option: <name> · <values...>
              · <title> · Price: <price> · Rating: N.A. · Description · Features · Reviews
              · (Attributes, with show_attrs) · Buy Now
    sub page  Instruction: · <instruction> · Back to Search · < Prev · its content (description text,
              features one per line, the attributes and category with show_attrs; reviews: none, as
              WebShop's loader leaves them empty)

Clickables (lower-cased button texts, product ASINs, option values): what `click[...]` accepts.
`search[...]` is accepted on the search page (where the search bar is; WebShop's agents list it
only there). Transitions (SimServer.receive):

    search[q]        -> results page 1 of the top 50 products for q (BM25, resrl.tasks.webshop.search)
    click[next >]    -> the next results page (always offered, as WebShop; past the end it is empty)
    click[< prev]    results -> previous results page; item -> results (the options are cleared);
                     sub page -> item
    click[<asin>]    -> that product's item page (no options chosen)
    click[<value>]   item page: chooses that value for its option (one value per option name)
    click[description | features | reviews | attributes] -> that sub page
    click[back to search] -> the search page, the session cleared
    click[buy now]   -> done: the purchase is scored (resrl.tasks.webshop.reward)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

PAGE_SIZE = 10  # engine.py PRODUCT_WINDOW
BUY, NEXT, PREV, BACK = "buy now", "next >", "< prev", "back to search"
SUB_PAGES = ("description", "features", "reviews", "attributes")
OBSERVATION_MODES = ("text", "text_rich")


@dataclass
class Element:
    """One visible text of a page: kind is "text", "button", "link" (a product) or "option"."""

    text: str
    kind: str = "text"
    clicked: bool = False


@dataclass
class Session:
    """One shopper's state on the site (WebShop's user_sessions entry)."""

    page: str = "search"                 # search | results | item | sub | done
    keywords: list = field(default_factory=list)
    page_no: int = 1
    results: list = field(default_factory=list)  # the products of the last search, best first
    asin: str | None = None
    options: dict = field(default_factory=dict)  # option name -> chosen value
    visited: set = field(default_factory=set)    # ASINs whose item page was opened since the last search page
    sub: str | None = None


class Site:
    """The site for one goal on one catalog (resrl.tasks.webshop.data.Catalog)."""

    def __init__(self, catalog, instruction: str, page_size: int = PAGE_SIZE, show_attrs: bool = False) -> None:
        self.catalog, self.instruction = catalog, instruction
        self.page_size, self.show_attrs = int(page_size), bool(show_attrs)
        self.session = Session()

    # ---- pages ------------------------------------------------------------------------------------
    def elements(self) -> list[Element]:
        s = self.session
        head = [Element("Instruction:"), Element(self.instruction)]
        if s.page == "search":
            return [Element("WebShop"), *head, Element("Search", "button")]
        nav = [Element("Back to Search", "button")]
        if s.page == "results":
            total = len(s.results)
            out = [*head, *nav, Element(f"Page {s.page_no} (Total results: {total})")]
            if s.page_no > 1:
                out.append(Element("< Prev", "button"))
            out.append(Element("Next >", "button"))
            for p in self.page_products():
                out += [Element(p.asin, "link", p.asin in s.visited), Element(p.title), Element(p.price_tag)]
            return out
        product = self.catalog.by_asin[s.asin]
        nav.append(Element("< Prev", "button"))
        if s.page == "item":
            out = [*head, *nav]
            for name, values in product.options.items():
                out.append(Element(name))
                out += [Element(v, "option", s.options.get(name) == v) for v in values]
            out += [Element(product.title), Element(f"Price: {product.price_tag}"), Element("Rating: N.A.")]
            out += [Element(b, "button") for b in ("Description", "Features", "Reviews")]
            if self.show_attrs:
                out.append(Element("Attributes", "button"))
            return out + [Element("Buy Now", "button")]
        if s.sub == "description":
            body = [Element(product.description)]
        elif s.sub == "features":
            body = [Element(b) for b in product.bullet_points]
        elif s.sub == "attributes":
            body = [Element(a) for a in product.attributes] + [
                Element(product.category), Element(product.query), Element(product.product_category)]
        else:  # reviews: WebShop's loader leaves every product's reviews empty
            body = []
        return [*head, *nav, *body]

    def page_products(self) -> list:
        s = self.session
        return s.results[(s.page_no - 1) * self.page_size:s.page_no * self.page_size]

    def text(self, mode: str = "text", after_instruction: bool = False) -> str:
        """The page as the agent reads it (module docstring); after_instruction: only what follows
        the instruction (verl-agent's observation, the instruction being the task)."""
        elements = self.elements()
        if after_instruction:
            at = next((i for i, e in enumerate(elements) if e.text == "Instruction:"), None)
            if at is not None:
                elements = elements[at + 2:]
        if mode == "text":
            return " [SEP] ".join(e.text.strip() for e in elements if e.text.strip())
        if mode != "text_rich":
            raise ValueError(f"observation mode must be one of {OBSERVATION_MODES}, got {mode!r}")
        lines, clicked = [], []
        for e in elements:
            if e.kind == "button":
                lines.append(f"[button] {e.text} [button_]")
            elif e.kind == "option":
                lines.append(f"  [clicked button] {e.text} [clicked button_]" if e.clicked else f"  [button] {e.text} [button_]")
                if e.clicked:
                    clicked.append(f"You have clicked {e.text}.")
            elif e.kind == "link":
                lines.append(f"\n[clicked button] {e.text} [clicked button_]" if e.clicked else f"\n[button] {e.text} [button_]")
            else:
                lines.append(e.text)
        return "".join(c + "\n" for c in reversed(clicked)) + "".join(line + "\n" for line in lines)

    def has_search_bar(self) -> bool:
        return self.session.page == "search"

    def clickables(self) -> list[str]:
        """What click[...] accepts here (lower-cased buttons and ASINs, option values); 'search' (the
        search bar's button) is not a click target, as in WebShop's step()."""
        out = []
        for e in self.elements():
            if e.kind in ("button", "link"):
                name = e.text.lower()
            elif e.kind == "option":
                name = e.text
            else:
                continue
            if name != "search" and name not in out:
                out.append(name)
        return out

    def available_actions(self) -> list[str]:
        """The admissible actions as verl-agent lists them: 'search[<your query>]' where the search
        bar is, then click[x] for every clickable."""
        return (["search[<your query>]"] if self.has_search_bar() else []) + [f"click[{c}]" for c in self.clickables()]

    def state_key(self) -> str:
        """The exact session state (GiGPO's anchor_mode "state")."""
        s = self.session
        return json.dumps([s.page, s.keywords, s.page_no, s.asin, sorted(s.options.items()), s.sub])

    # ---- actions ----------------------------------------------------------------------------------
    def search(self, query: str) -> None:
        s = self.session
        s.keywords = query.split(" ")
        s.results = self.catalog.search_engine().search(" ".join(s.keywords))
        s.page, s.page_no, s.asin, s.options, s.sub = "results", 1, None, {}, None

    def click(self, name: str) -> bool:
        """Click `name` (a clickable of this page, see `clickables`); True when it is "buy now"."""
        s = self.session
        if name == BUY:
            s.page = "done"
            return True
        if name == BACK:
            self.session = Session()
        elif name == NEXT and s.page == "results":
            s.page_no += 1
        elif name == PREV and s.page == "results":
            s.page_no -= 1
        elif name == PREV and s.page == "sub":
            s.page, s.sub = "item", None
        elif name == PREV and s.page == "item":
            s.page, s.asin, s.options = "results", None, {}
        elif name in SUB_PAGES:
            s.page, s.sub = "sub", name
        elif s.page == "results":
            s.asin = next(p.asin for p in self.page_products() if p.asin.lower() == name)
            s.visited.add(s.asin)
            s.page, s.options = "item", {}
        else:  # an option value of the item page
            product = self.catalog.by_asin[s.asin]
            option = next(n for n, values in product.options.items() if name in values)
            s.options[option] = name
        return False


__all__ = ["Site", "Session", "Element", "PAGE_SIZE", "BUY", "NEXT", "PREV", "BACK", "SUB_PAGES", "OBSERVATION_MODES"]
