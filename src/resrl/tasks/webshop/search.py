"""The search engine over a catalog: BM25, as WebShop's pyserini (Lucene) index scores it.

WebShop indexes one document per product (search_engine/convert_product_file_format.py): the
lower-cased title, description, first feature line and options ("color: red, blue, and size: l")
joined by spaces, and searches it with pyserini's Lucene BM25 (k1 = 0.9, b = 0.4), returning the
top 50 (engine.py SEARCH_RETURN_N). Here the same documents are scored by Lucene's BM25 written out
in Python (no Java):

    score(q, d) = Σ_{t ∈ q} idf(t) · tf(t, d) / (tf(t, d) + k1 · (1 − b + b · |d| / avgdl))          (3)
    idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))

Tokens: lower-cased alphanumeric runs, English stop words removed, possessive 's and plural s
stripped (Lucene's EnglishAnalyzer stems with Porter; this minimal stemmer is the one
difference, and Lucene's lossy length encoding is not reproduced). Ties break by catalog order.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Sequence

K1, B = 0.9, 0.4  # pyserini's Lucene BM25 defaults
SEARCH_RETURN_N = 50
# Lucene's EnglishAnalyzer stop set (ENGLISH_STOP_WORDS_SET)
STOP_WORDS = frozenset("a an and are as at be but by for if in into is it no not of on or such that the their "
                       "then there these they this to was will with".split())
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def stem(word: str) -> str:
    """Possessive stripping (EnglishPossessiveFilter) and Lucene's EnglishMinimalStemmer: -ies -> -y
    (not after a / e), -es / -s -> drop the s (not -us, -ss, -aes, -ees, -oes, -ies after a / e)."""
    if word.endswith("'s"):
        word = word[:-2]
    word = word.replace("'", "")
    n = len(word)
    if n < 3 or word[-1] != "s" or word[-2] in "us":
        return word
    if word[-2] == "e":
        if n > 3 and word[-3] == "i" and word[-4] not in "ae":
            return word[:-3] + "y"
        if word[-3] in "iaoe":
            return word
    return word[:-1]


def tokenize(text: str) -> list[str]:
    return [stem(t) for t in _TOKEN.findall(str(text).lower()) if t not in STOP_WORDS]


def document(product) -> str:
    """WebShop's indexed text of a product (convert_product_file_format.py)."""
    option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product.options.items())
    first = product.bullet_points[0] if product.bullet_points else ""
    return " ".join([product.title, product.description, first, option_text]).lower()


class ProductIndex:
    """An inverted index of the catalog's documents; `search(query, k)` -> products by eq. (3)."""

    def __init__(self, products: Sequence, k1: float = K1, b: float = B) -> None:
        self.products = list(products)
        self.k1, self.b = k1, b
        self.lengths: list[int] = []
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, p in enumerate(self.products):
            counts = Counter(tokenize(document(p)))
            self.lengths.append(sum(counts.values()))
            for term, tf in counts.items():
                self.postings.setdefault(term, []).append((i, tf))
        n = len(self.products)
        self.avgdl = sum(self.lengths) / n if n else 0.0
        self.idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self.postings.items()}

    def scores(self, query: str) -> dict[int, float]:
        out: dict[int, float] = {}
        for term in tokenize(query):  # a repeated query term counts again, as in Lucene's boolean query
            idf = self.idf.get(term)
            if idf is None:
                continue
            for i, tf in self.postings[term]:
                norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avgdl)
                out[i] = out.get(i, 0.0) + idf * tf / (tf + norm)
        return out

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list:
        ranked = sorted(self.scores(query).items(), key=lambda item: (-item[1], item[0]))
        return [self.products[i] for i, _ in ranked[:k]]


__all__ = ["ProductIndex", "tokenize", "stem", "document", "K1", "B", "SEARCH_RETURN_N", "STOP_WORDS"]
