"""MuJoCo Warp's height-field contacts made to agree with C MuJoCo's.

MuJoCo Warp (4.0.0) collides a convex geom with a height field the way C MuJoCo does: prism by prism, each prism
(a triangle of the field and the field's base below it) against the geom through GJK and EPA. Where the two
overlap through a prism's side wall, so that the supports that make up the result come from both above and below,
it then discards the result and re-derives the contact by a vertical projection onto the prism's top triangle,
or, where the geom's point lies outside that triangle, onto the height of one of its corners. On a field whose
neighbouring samples differ by centimetres (a riser, the random surface) that corner is often far below the geom,
and the contact comes out tens of millimetres deep with its normal pointing down: the solver pulls the foot into
the ground. ``scripts/hfield_contacts.py`` shows it for capsules and spheres on random fields: the deepest
contacts' depths differ from C MuJoCo's by up to 67 mm in about one pose in six, and normals point down.

Without the re-derivation, the prism's own GJK/EPA result stands, which is what C MuJoCo reports: the same
script finds the two engines' deepest contacts equal in depth and normal on every pose. ``install`` does that by
handing the two functions that re-derive (EPA's witness points and the shallow-contact inflation) a geom type
other than the height field's for the first geom; neither reads that type for anything else, so every other
pair of geom types compiles to the same code as before. It runs before the first kernel is built (Warp resolves
a kernel's functions when it builds it), for the mujoco_warp versions in ``FIXED_VERSIONS`` only: another
version's code is unknown here, and is left as it is.
"""

# No `from __future__ import annotations`: Warp reads the functions' annotations as objects, and the types they
# name are imported inside ``install``, out of reach of a string annotation.
import functools

import mujoco_warp as mjw
import warp as wp

FIXED_VERSIONS = ("4.0.0",)


@functools.cache
def install() -> bool:
    """Once per process; whether the fix is in (False: a mujoco_warp version it was not written for, whose private
    modules are not even imported)."""
    if mjw.__version__ not in FIXED_VERSIONS:
        return False
    from mujoco_warp._src import collision_gjk
    from mujoco_warp._src.collision_core import Geom
    from mujoco_warp._src.collision_gjk import GJKResult, Polytope
    from mujoco_warp._src.types import GeomType

    epa_witness, inflate, hfield = collision_gjk._epa_witness, collision_gjk._inflate, int(GeomType.HFIELD)

    @wp.func
    def first_type(geomtype: int) -> int:
        """The first geom's type as the two functions below see it: a height field's is no longer one."""
        return wp.where(geomtype == hfield, -1, geomtype)

    @wp.func
    def prism_epa_witness(pt: Polytope, geom1: Geom, geom2: Geom, geomtype1: int, geomtype2: int, face_idx: int):
        x1, x2, dist = epa_witness(pt, geom1, geom2, first_type(geomtype1), geomtype2, face_idx)
        return x1, x2, dist

    @wp.func
    def prism_inflate(
        result: GJKResult, geom1: Geom, geom2: Geom, geomtype1: int, geomtype2: int, margin1: float, margin2: float
    ):
        dist, x1, x2 = inflate(result, geom1, geom2, first_type(geomtype1), geomtype2, margin1, margin2)
        return dist, x1, x2

    collision_gjk._epa_witness = prism_epa_witness
    collision_gjk._inflate = prism_inflate
    return True
