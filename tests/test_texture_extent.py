"""Where the texture rungs' 1-D textures start and end (textures.texture_extent): inside the
operand's allocation, aligned as the device requires, float4 only when the last vector fits."""

import pytest

from gemmlab.core.textures import texture_extent

ALIGN, WIDE = 512, 1 << 27
ALLOC = 1 << 20  # an allocation at 1 MiB


def test_texture_starts_at_the_aligned_base_and_gives_the_element_offset():
    ptr = ALLOC + 512 + 20          # 5 floats past an aligned address
    base, size, ch = texture_extent(ptr, 400, 1, ALLOC, 4096, ALIGN, WIDE)
    assert base == ALLOC + 512 and (ptr - base) // 4 == 5 and ch == 1
    assert base + size >= ptr + 400


def test_float4_texture_rounds_its_end_up_to_a_whole_vector_inside_the_allocation():
    base, size, ch = texture_extent(ALLOC, 4 * 10, 4, ALLOC, 4096, ALIGN, WIDE)  # 10 floats: 2.5 vectors
    assert (ch, size) == (4, 48)


def test_float4_texture_whose_last_vector_crosses_the_allocation_end_becomes_float():
    base, size, ch = texture_extent(ALLOC, 4 * 10, 4, ALLOC, 40, ALIGN, WIDE)   # allocation ends at float 10
    assert (ch, size) == (1, 40)


def test_texture_never_starts_before_its_allocation():
    with pytest.raises(ValueError, match="aligned to 512 bytes"):
        texture_extent(ALLOC + 256 + 16, 64, 1, ALLOC + 256, 4096, ALIGN, WIDE)


def test_operands_wider_than_the_device_limit_are_refused():
    with pytest.raises(ValueError, match="1-D linear texture limit of 1000"):
        texture_extent(ALLOC, 4 * 4000, 1, ALLOC, 1 << 16, ALIGN, 1000)
