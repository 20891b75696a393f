"""Which parts of an HTML page are the site around the text (navigation chrome), told by
structure, and which pages are navigation as a whole.

Chrome is left out whole, with everything inside it: the elements HTML5 made for it (`nav`,
`aside`, and a `header` or `footer` of the page rather than of an article), the ARIA roles
that mark it (navigation, banner, contentinfo, search), and the classes and ids the
documentation generators give it: DocBook's `navheader`/`navfooter` and tables of contents,
Sphinx's `related` bars, sidebar and footer, texinfo's `header` and `section-toc`,
MediaWiki's (cppreference) navbar, breadcrumbs and category links, gtk-doc's navigation
bar, SQLite's menus and table of contents. A footnote is content, though Sphinx writes it
as an `aside`, and so is a sidebar inside an article's section (reStructuredText's
`sidebar`: a box of text beside the text, not the site's sidebar).

A page is navigation as a whole when most of its text is the text of links within the site
(a book's table of contents, a language picker; links to other sites are a list of
references, content), when it holds a book's index (DocBook's `index`, Sphinx's and
texinfo's index tables), when it only sends the browser on (a `Refresh` redirect, as
texinfo writes for each moved node), or when it is a language picker: a page whose name
carries no language that links to itself in a language (`index.html` to `index.en.html`,
the names by which a web server picks a page's language, as the Debian manuals install
them), whatever notes about the files it also holds. Such a page is indexed by its title
only and marked, so retrieval ranks it after every passage of content
(`retrieval.retriever`).
"""

from __future__ import annotations

import re

Attrs = list[tuple[str, str | None]]

CHROME_TAGS = frozenset({"nav", "aside"})
# A header or footer inside these belongs to the article, not to the site.
SECTIONING = frozenset({"article", "section", "main"})
PAGE_EDGES = frozenset({"header", "footer"})
CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "search"})
CHROME_CLASSES = frozenset(
    {
        # DocBook
        "navheader", "navfooter", "toc", "list-of-tables", "list-of-figures",
        "list-of-examples", "list-of-equations", "breadcrumbs", "breadcrumb",
        # Sphinx
        "related", "sphinxsidebar", "sphinxsidebarwrapper", "footer", "mobile-nav",
        "headerlink", "skip-link", "skiplink", "skip-to-content", "toctree-wrapper",
        # texinfo / makeinfo
        "header", "nav-panel", "section-toc", "shortcontents", "mini-toc",
        # MediaWiki (cppreference)
        "t-navbar", "printfooter", "catlinks", "mw-jump", "t-example-live-link",
        # gtk-doc (its Top | Description bar and Home/Up/Prev/Next icons)
        "navigation",
        # SQLite's documentation
        "fancy_toc", "menu", "mainmenu", "submenu", "searchmenu", "tagline",
    }
)  # fmt: skip
CHROME_IDS = frozenset({"siteSub", "contentSub", "jump-to-nav", "catlinks", "footer", "toc"})
NOT_CHROME_CLASSES = frozenset({"footnote", "footnotes", "footnote-list"})
# Parts of a table are named by their own classes (pandoc's `tr class="header"` is a header
# row): the class and id rules are for the blocks around the text, not for these.
TABLE_PARTS = frozenset({"tr", "td", "th", "thead", "tbody", "tfoot", "caption", "col"})
# A page whose link text is at least this share of its text is navigation (measured on the
# Debian manuals: docs/formats.md, "Main content only").
NAVIGATION_LINK_SHARE = 0.6
# Elements that make their page a book's index: DocBook's, Sphinx's, texinfo's (`index-cp`...).
INDEX_CLASSES = frozenset({"index", "indextable", "genindextable"})
INDEX_CLASS_PREFIX = "index-"
# A page's name in a language: `index.en.html`, `index.pt-br.html`, `index.html.de`.
_LANGUAGE = re.compile(r"[a-z]{2,3}(?:[-_][a-z]{2,4})?")
SKIP_LINK = re.compile(r"\s*skip\s+to\s+(?:the\s+)?(?:main\s+)?(?:content|navigation|text)\b", re.I)


def is_chrome(tag: str, attrs: Attrs, in_section: bool) -> bool:
    """Whether the element `tag` with `attrs` is chrome; `in_section`: it stands inside an
    article, section or main element (whose header and footer are the article's)."""
    if not attrs:  # most tags: told by their name alone
        return tag in CHROME_TAGS or (tag in PAGE_EDGES and not in_section)
    values = dict(attrs)
    classes = frozenset((values.get("class") or "").split())
    if classes & NOT_CHROME_CLASSES or (in_section and tag == "aside" and "sidebar" in classes):
        return False
    if tag in CHROME_TAGS or (tag in PAGE_EDGES and not in_section):
        return True
    if (values.get("role") or "").strip() in CHROME_ROLES:
        return True
    if tag in TABLE_PARTS:
        return False
    return bool(classes & CHROME_CLASSES) or values.get("id") in CHROME_IDS


def is_index(attrs: Attrs) -> bool:
    """Whether an element with `attrs` is a book's index: navigation when it fills most of its
    page, left out of a page it does not fill."""
    if not attrs:
        return False
    classes = (dict(attrs).get("class") or "").split()
    return any(c in INDEX_CLASSES or c.startswith(INDEX_CLASS_PREFIX) for c in classes)


def is_internal(href: str) -> bool:
    """Whether a link leads within the site: a relative address or a place on the page."""
    return not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:|//", href.strip())


def is_redirect(attrs: Attrs) -> bool:
    """A `<meta http-equiv="refresh">`: the page only sends the browser elsewhere."""
    values = dict(attrs)
    return (values.get("http-equiv") or "").strip().lower() == "refresh"


def is_language_picker(name: str, links: frozenset[str]) -> bool:
    """Whether the page named `name`, with no language in its name, links to a copy of
    itself in a language: `index.html` to `index.en.html` or `index.html.en`."""
    stem, dot, extension = name.lower().rpartition(".")
    if not dot or "." in stem:  # `index.en.html` is a page in a language, not the picker
        return False
    for link in links:
        parts = link.partition("#")[0].strip().rsplit("/", 1)[-1].lower().split(".")
        if len(parts) == 3 and parts[0] == stem and extension in (parts[1], parts[2]):
            language = parts[2] if parts[1] == extension else parts[1]
            if _LANGUAGE.fullmatch(language):
                return True
    return False


def is_navigation(link_chars: int, text_chars: int) -> bool:
    """Whether a page of `text_chars` characters, `link_chars` of them the text of links
    within the site, is a page of links (a table of contents, a language picker)."""
    return text_chars > 0 and link_chars >= NAVIGATION_LINK_SHARE * text_chars
