"""Synthetic benchmarks with exact part and object masks, for measuring part coverage.

Two generators, both deterministic and vectorised across a batch with numpy:

* **SynthBirds** (:func:`make_part_dataset`, :func:`part_dataset`): a procedural fine-grained
  dataset. Each image shows one bird made of eight named parts (body, head, beak, eye, wing,
  tail, legs, crest) drawn as filled ellipses and convex polygons over a random crop of a
  bundled scikit-image photo, with loose "distractor" parts in the background. The 12 classes
  differ only in three small parts (beak type, crest present or not, tail banded or plain);
  every other property (colours, pose, proportions, background, distractors) is drawn
  independently of the class. Outputs an exact per-pixel part-id mask, a separate distractor
  mask, one keypoint per part and the object box.
* **Cluttered (Fashion-)MNIST** (:func:`clutter_items`, :func:`cluttered`): the real 28x28
  item on a larger canvas with crops of *other* items pasted around it, with the exact object
  mask and box.

Randomness is counter-based: every random number is a hash of ``(seed, image index, variable
name, component)``, so image ``i`` depends only on ``(seed, i)`` (plus, for the cluttered set,
the item pool it draws clutter from), any subset can be regenerated alone, and adding a new
random variable never shifts the others.

Same seed, same bytes holds for a fixed platform and fixed numpy / scikit-image versions (the
backgrounds are resized once with ``skimage.transform.resize``; numpy's vectorised sin/cos may
differ in the last bit between CPUs, which could only move a pixel whose centre lies within
~1e-12 px of a shape edge).

Coordinates: ``x`` is the column, ``y`` the row, pixel ``(row r, col c)`` covers
``[c, c+1) x [r, r+1)`` and a shape covers the pixel when it contains the pixel centre
``(c + 0.5, r + 0.5)``. Boxes are ``(x0, y0, x1, y1)`` with ``x1, y1`` exclusive.

SynthBirds classes (label = 4 * beak + 2 * crest + banded; see :func:`class_table`):

=====  ======================  =========================  ======  ======
label  name                    beak (colour)              crest   tail
=====  ======================  =========================  ======  ======
0      cone_bare_plain         cone: short, thick, yellow no      plain
1      cone_bare_banded        cone                       no      banded
2      cone_crested_plain      cone                       yes     plain
3      cone_crested_banded     cone                       yes     banded
4      dagger_bare_plain       dagger: long, thin, black  no      plain
5      dagger_bare_banded      dagger                     no      banded
6      dagger_crested_plain    dagger                     yes     plain
7      dagger_crested_banded   dagger                     yes     banded
8      hook_bare_plain         hook: drooping tip, red    no      plain
9      hook_bare_banded        hook                       no      banded
10     hook_crested_plain      hook                       yes     plain
11     hook_crested_banded     hook                       yes     banded
=====  ======================  =========================  ======  ======

Modules: :mod:`.counter_random` and :mod:`.raster` are shared; SynthBirds is :mod:`.bird_design` (parts, classes,
settings, geometry), :mod:`.bird_scenes` (sampling), :mod:`.bird_render` (rasterising) and :mod:`.bird_dataset`
(sets and splits); :mod:`.cluttered` the cluttered sets; :mod:`.backgrounds` the photos both draw on;
:mod:`.in_memory` the ``Dataset`` both return; :mod:`.diagnostics` speed and a sample grid. The names below are the
public face; import them from here.
"""

from __future__ import annotations

from tokenprune.data.synthetic.backgrounds import BACKGROUND_PHOTOS, photo_backgrounds
from tokenprune.data.synthetic.bird_dataset import SPLIT_OFFSETS, make_part_dataset, part_dataset
from tokenprune.data.synthetic.bird_design import (
    BEAK_VARIANTS,
    BIRD_CLASSES,
    CLASS_NAMES,
    DISCRIMINATIVE_PARTS,
    N_PARTS,
    PART_NAMES,
    BeakVariant,
    BirdClass,
    BirdConfig,
    class_table,
)
from tokenprune.data.synthetic.bird_render import render_bird_scenes
from tokenprune.data.synthetic.bird_scenes import sample_bird_scenes
from tokenprune.data.synthetic.cluttered import clutter_items, cluttered
from tokenprune.data.synthetic.diagnostics import benchmark_generation, save_sample_grid

__all__ = [
    "PART_NAMES",
    "N_PARTS",
    "DISCRIMINATIVE_PARTS",
    "BEAK_VARIANTS",
    "BeakVariant",
    "BirdClass",
    "BIRD_CLASSES",
    "CLASS_NAMES",
    "BirdConfig",
    "BACKGROUND_PHOTOS",
    "SPLIT_OFFSETS",
    "sample_bird_scenes",
    "render_bird_scenes",
    "make_part_dataset",
    "part_dataset",
    "class_table",
    "clutter_items",
    "photo_backgrounds",
    "cluttered",
    "benchmark_generation",
    "save_sample_grid",
]
