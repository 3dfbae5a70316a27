"""The read engine's seam: what the feature packages (``insight/``,
``server_groups/``) build on, and the only module of ``read/`` they import besides
the public ``request`` and ``candidates`` (``tests/test_layers.py`` refuses imports of
another package's underscore modules).

Three kinds of names:

- **clauses** — small named SQL pieces of a group's statements (:func:`capacity`,
  :func:`capacity_fits`, :func:`has_room`, :func:`has_any_trait`, ...), the per-group
  filters, declared once (:data:`GROUP_FILTERS` of :class:`GroupFilter`, in the order
  their reasons are told :data:`TOLD_FILTERS`; the collective one :data:`TREE_WIDE`,
  :func:`tree_wide_sets`; sharing rules :data:`OWN`, :data:`ANCHOR`, :data:`LOCAL`,
  :func:`ruled`) with :func:`filter_shape`, :func:`shape_filters`,
  :func:`provider_filters`, :func:`group_filters`, and the statements built on them
  (:func:`roots_stmt`, :func:`roots_in_aggregates_stmt`);
- **the engine** — names and sharing pairs (:func:`fetch_names`, :func:`fetch_sharing`),
  one batch's group statements turned into search data (:func:`load_groups`,
  :class:`Loaded`; a batch of roots: :class:`Roots`, :data:`ROOT_IDS`);
- **the search** — :func:`plan_slots`, :func:`search_anchor` under a
  :class:`SearchBudget`.

>>> from rpquery.read import engine
>>> engine.SHARING_TRAIT
'MISC_SHARES_VIA_AGGREGATE'
"""

from __future__ import annotations

from rpquery.read._clauses import (
    Binds,
    Ids,
    capacity,
    capacity_fits,
    has_any_trait,
    has_room,
    id_list,
    in_every_aggregate_set,
    join_usage,
    not_in_aggregates,
    unit_allows,
)
from rpquery.read._filters import (
    ANCHOR,
    GROUP_FILTERS,
    LOCAL,
    OWN,
    TOLD_FILTERS,
    TREE_WIDE,
    GroupFilter,
    filter_shape,
    provider_filters,
    ruled,
    shape_filters,
    tree_wide_sets,
)
from rpquery.read._names import SHARING_TRAIT, Names
from rpquery.read.candidates._batches import ROOT_IDS, Roots
from rpquery.read.candidates._execute import (
    Loaded,
    NamesKey,
    fetch_names,
    load_groups,
    names_key,
)
from rpquery.read.candidates._search import SearchBudget, SearchRules, plan_slots, search_anchor
from rpquery.read.candidates._sharing import Sharing, fetch_sharing
from rpquery.read.candidates._sql import group_filters, roots_in_aggregates_stmt, roots_stmt

__all__ = [
    "ANCHOR",
    "Binds",
    "GROUP_FILTERS",
    "GroupFilter",
    "LOCAL",
    "OWN",
    "TOLD_FILTERS",
    "TREE_WIDE",
    "Ids",
    "Loaded",
    "Names",
    "NamesKey",
    "ROOT_IDS",
    "Roots",
    "SHARING_TRAIT",
    "SearchBudget",
    "SearchRules",
    "Sharing",
    "capacity",
    "capacity_fits",
    "fetch_names",
    "fetch_sharing",
    "filter_shape",
    "group_filters",
    "has_any_trait",
    "has_room",
    "id_list",
    "in_every_aggregate_set",
    "join_usage",
    "load_groups",
    "names_key",
    "not_in_aggregates",
    "plan_slots",
    "provider_filters",
    "ruled",
    "roots_in_aggregates_stmt",
    "roots_stmt",
    "search_anchor",
    "shape_filters",
    "tree_wide_sets",
    "unit_allows",
]
