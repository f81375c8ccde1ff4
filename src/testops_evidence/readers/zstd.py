"""A Zstandard decoder (RFC 8878) in pure Python, for hostile input.

Inspect AI writes its ``.eval`` logs as zip archives whose entries are Zstandard-compressed (zip method
93). The standard library reads that only from Python 3.14, and the runtime dependencies are fixed to
four packages, so the decoder is here: written from the RFC, bounded, and strict. Every malformed input
is a :class:`ZstdError` (the archive reader turns it into ``import.unsafe_archive``); nothing else escapes,
and the output can never grow past the cap the caller gives (a 4-byte RLE block cannot inflate an entry
past its declared size).

What is decoded: Zstandard frames (one or several, with skippable frames between them), raw, RLE and
compressed blocks, raw/RLE/Huffman/treeless literals, predefined/RLE/FSE/repeat sequence tables, and
repeat offsets. What is refused: dictionaries (``Dictionary_ID`` other than 0; Inspect uses none),
reserved bits and block types, windows over 128 MiB. The optional content checksum (XXH64) is skipped,
not verified: the zip entry's CRC-32, which :mod:`zipfile` checks on every entry, covers the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

MAGIC = 0xFD2FB528
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE = 0x184D2A50
_BLOCK_MAX = 128 * 1024
_WINDOW_MAX = 128 * 1024 * 1024

# Literal-length and match-length codes: (baseline, extra bits) — RFC 8878, 3.1.1.3.2.1.1.
_LL_CODES: tuple[tuple[int, int], ...] = (
    *((n, 0) for n in range(16)),
    (16, 1), (18, 1), (20, 1), (22, 1), (24, 2), (28, 2), (32, 3), (40, 3), (48, 4), (64, 6), (128, 7),
    (256, 8), (512, 9), (1024, 10), (2048, 11), (4096, 12), (8192, 13), (16384, 14), (32768, 15), (65536, 16),
)
_ML_CODES: tuple[tuple[int, int], ...] = (
    *((n + 3, 0) for n in range(32)),
    (35, 1), (37, 1), (39, 1), (41, 1), (43, 2), (47, 2), (51, 3), (59, 3), (67, 4), (83, 4), (99, 5), (131, 7),
    (259, 8), (515, 9), (1027, 10), (2051, 11), (4099, 12), (8195, 13), (16387, 14), (32771, 15), (65539, 16),
)
# Predefined distributions — RFC 8878, 3.1.1.3.2.2.
_LL_DEFAULT = (4, 3, *([2] * 11), 1, 1, 1, *([2] * 9), 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1)
_ML_DEFAULT = (1, 4, 3, 2, 2, 2, 2, 2, 2, *([1] * 37), *([-1] * 7))
_OF_DEFAULT = (1, 1, 1, 1, 1, 1, 2, 2, 2, *([1] * 15), *([-1] * 5))
_LL_MAX_LOG, _ML_MAX_LOG, _OF_MAX_LOG = 9, 9, 8
_OF_MAX_CODE = 31


class ZstdError(ValueError):
    """The input is not a well-formed Zstandard stream, or it inflates past the cap."""


# --- bit streams ---------------------------------------------------------------------------------------


class _Forward:
    """Little-endian bits from the start of ``data`` (FSE table descriptions)."""

    __slots__ = ("bit", "data", "end", "start")

    def __init__(self, data: bytes | memoryview, start: int, end: int) -> None:
        self.data, self.start, self.end, self.bit = data, start, end, 0

    def read(self, count: int) -> int:
        first = self.start + (self.bit >> 3)
        last = self.start + ((self.bit + count + 7) >> 3)
        if last > self.end:
            raise ZstdError("a table description runs past its block")
        value = int.from_bytes(self.data[first:last], "little") >> (self.bit & 7)
        self.bit += count
        return value & ((1 << count) - 1)

    def peek(self, count: int) -> int:
        bit = self.bit
        first = self.start + (bit >> 3)
        last = min(self.start + ((bit + count + 7) >> 3), self.end)
        value = int.from_bytes(self.data[first:last], "little") >> (bit & 7)
        return value & ((1 << count) - 1)

    def skip(self, count: int) -> None:
        self.bit += count
        if self.start + ((self.bit + 7) >> 3) > self.end:
            raise ZstdError("a table description runs past its block")

    def consumed_bytes(self) -> int:
        return (self.bit + 7) >> 3


class _Backward:
    """Bits read from the end of a stream towards its start (Huffman and FSE streams).

    The last byte's highest set bit marks where the stream begins; reading past the first byte yields
    zeros and is recorded as an overflow, which each caller judges (RFC 8878, 4.1 and 4.2.2)."""

    __slots__ = ("acc", "data", "nbits", "pos", "start", "total", "used")

    def __init__(self, data: bytes | memoryview, start: int, end: int) -> None:
        if end <= start:
            raise ZstdError("an entropy-coded stream is empty")
        last = data[end - 1]
        if last == 0:
            raise ZstdError("an entropy-coded stream has no end marker")
        marker = last.bit_length() - 1
        self.data, self.start, self.pos = data, start, end - 1
        self.acc = last & ((1 << marker) - 1)
        self.nbits = marker
        self.total = (end - 1 - start) * 8 + marker  # bits in the stream
        self.used = 0

    def _fill(self, count: int) -> None:
        while self.nbits < count:
            if self.pos > self.start:
                take = min(7, self.pos - self.start)
                chunk = int.from_bytes(self.data[self.pos - take:self.pos], "little")
                self.acc = (self.acc << (take * 8)) | chunk
                self.nbits += take * 8
                self.pos -= take
            else:  # past the start: zeros, counted as overflow by `used`
                self.acc <<= count - self.nbits
                self.nbits = count

    def read(self, count: int) -> int:
        if count == 0:
            return 0
        if self.nbits < count:
            self._fill(count)
        self.nbits -= count
        value = self.acc >> self.nbits
        self.acc &= (1 << self.nbits) - 1
        self.used += count
        return value

    def peek(self, count: int) -> int:
        if self.nbits < count:
            self._fill(count)
        return self.acc >> (self.nbits - count)

    def skip(self, count: int) -> None:
        self.nbits -= count
        self.acc &= (1 << self.nbits) - 1
        self.used += count

    @property
    def overflowed(self) -> bool:
        return self.used > self.total

    @property
    def finished(self) -> bool:
        return self.used == self.total


# --- FSE ---------------------------------------------------------------------------------------------------


class _FseTable:
    """A decoding table: per state, the symbol, the bits to read and the base of the next state."""

    __slots__ = ("accuracy", "base", "bits", "symbol")

    def __init__(self, accuracy: int, symbol: list[int], bits: list[int], base: list[int]) -> None:
        self.accuracy, self.symbol, self.bits, self.base = accuracy, symbol, bits, base

    @classmethod
    def rle(cls, symbol: int) -> _FseTable:
        return cls(0, [symbol], [0], [0])

    @classmethod
    def build(cls, counts: Sequence[int], accuracy: int) -> _FseTable:
        size = 1 << accuracy
        symbols = [0] * size
        high = size - 1
        following = [0] * len(counts)
        for sym, count in enumerate(counts):
            if count == -1:
                symbols[high] = sym
                high -= 1
                following[sym] = 1
            else:
                following[sym] = count
        step = (size >> 1) + (size >> 3) + 3
        mask = size - 1
        position = 0
        for sym, count in enumerate(counts):
            for _ in range(max(count, 0)):
                symbols[position] = sym
                position = (position + step) & mask
                while position > high:
                    position = (position + step) & mask
        if position != 0:
            raise ZstdError("an FSE distribution does not fill its table")
        bits = [0] * size
        base = [0] * size
        for state in range(size):
            sym = symbols[state]
            nxt = following[sym]
            following[sym] = nxt + 1
            nb = accuracy - (nxt.bit_length() - 1)
            bits[state] = nb
            base[state] = (nxt << nb) - size
        return cls(accuracy, symbols, bits, base)


def _read_distribution(stream: _Forward, max_symbol: int, max_accuracy: int) -> tuple[list[int], int]:
    """An FSE table description (RFC 8878, 4.1.1): normalised counts and the accuracy log."""
    accuracy = stream.read(4) + 5
    if accuracy > max_accuracy:
        raise ZstdError(f"an FSE accuracy log of {accuracy} is over the maximum {max_accuracy}")
    remaining = (1 << accuracy) + 1
    threshold = 1 << accuracy
    nbits = accuracy + 1
    counts: list[int] = []
    while remaining > 1:
        if len(counts) > max_symbol:
            raise ZstdError("an FSE distribution has too many symbols")
        low_max = (2 * threshold - 1) - remaining
        small = stream.peek(nbits - 1)
        if small < low_max:
            value = small
            stream.skip(nbits - 1)
        else:
            value = stream.peek(nbits)
            if value >= threshold:
                value -= low_max
            stream.skip(nbits)
        count = value - 1
        remaining -= abs(count)
        counts.append(count)
        if remaining <= 1:
            break
        if count == 0:
            while True:
                repeat = stream.read(2)
                counts.extend([0] * repeat)
                if repeat != 3:
                    break
            if len(counts) > max_symbol + 1:
                raise ZstdError("an FSE distribution has too many symbols")
        while remaining < threshold:
            nbits -= 1
            threshold >>= 1
    if remaining != 1 or len(counts) > max_symbol + 1:
        raise ZstdError("an FSE distribution does not add up")
    return counts, accuracy


# --- Huffman ---------------------------------------------------------------------------------------------


class _Huffman:
    __slots__ = ("bits", "max_bits", "symbol")

    def __init__(self, weights: list[int]) -> None:
        if not weights or len(weights) > 255:
            raise ZstdError("a Huffman tree has no or too many weights")
        total = 0
        for weight in weights:
            if weight > 11:
                raise ZstdError("a Huffman weight is over 11")
            if weight:
                total += 1 << (weight - 1)
        if total == 0:
            raise ZstdError("a Huffman tree has only zero weights")
        max_bits = total.bit_length()  # the next power of two above total
        rest = (1 << max_bits) - total
        if rest & (rest - 1):
            raise ZstdError("a Huffman tree's implied last weight is not a power of two")
        weights = [*weights, rest.bit_length()]
        if max_bits > 11:
            raise ZstdError("a Huffman tree is deeper than 11 bits")
        size = 1 << max_bits
        symbol = [0] * size
        bits = [0] * size
        position = 0
        for weight in range(1, max_bits + 1):
            span = 1 << (weight - 1)
            nb = max_bits + 1 - weight
            for sym, w in enumerate(weights):
                if w == weight:
                    symbol[position:position + span] = [sym] * span
                    bits[position:position + span] = [nb] * span
                    position += span
        self.symbol, self.bits, self.max_bits = symbol, bits, max_bits

    def decode(self, data: bytes | memoryview, start: int, end: int, count: int, out: bytearray) -> None:
        stream = _Backward(data, start, end)
        symbol, bits, width = self.symbol, self.bits, self.max_bits
        peek, skip = stream.peek, stream.skip
        for _ in range(count):
            index = peek(width)
            out.append(symbol[index])
            skip(bits[index])
        if not stream.finished:
            raise ZstdError("a Huffman stream does not end where its symbols do")


def _read_huffman(data: bytes | memoryview, pos: int, end: int) -> tuple[_Huffman, int]:
    """A Huffman tree description (RFC 8878, 4.2.1); returns the table and the position after it."""
    if pos >= end:
        raise ZstdError("a Huffman tree description is missing")
    header = data[pos]
    pos += 1
    weights: list[int] = []
    if header >= 128:
        count = header - 127
        size = (count + 1) // 2
        if pos + size > end:
            raise ZstdError("a Huffman tree description runs past its block")
        for i in range(count):
            byte = data[pos + i // 2]
            weights.append(byte >> 4 if i % 2 == 0 else byte & 15)
        return _Huffman(weights), pos + size
    size = header
    if size == 0 or pos + size > end:
        raise ZstdError("a compressed Huffman tree description has a bad size")
    head = _Forward(data, pos, pos + size)
    counts, accuracy = _read_distribution(head, 255, 6)
    table = _FseTable.build(counts, accuracy)
    stream = _Backward(data, pos + head.consumed_bytes(), pos + size)
    one = stream.read(accuracy)
    two = stream.read(accuracy)
    sym, nb, base = table.symbol, table.bits, table.base
    while True:
        if len(weights) > 254:
            raise ZstdError("a Huffman tree has too many weights")
        weights.append(sym[one])
        one = base[one] + stream.read(nb[one])
        if stream.overflowed:
            weights.append(sym[two])
            break
        weights.append(sym[two])
        two = base[two] + stream.read(nb[two])
        if stream.overflowed:
            weights.append(sym[one])
            break
    return _Huffman(weights), pos + size


# --- blocks ----------------------------------------------------------------------------------------------


class _Frame:
    """State carried between the blocks of one frame."""

    __slots__ = ("begin", "huffman", "ll", "ml", "of", "reps")

    def __init__(self, begin: int) -> None:
        self.begin = begin  # where this frame's output starts: a match never reaches before it
        self.huffman: _Huffman | None = None
        self.ll: _FseTable | None = None
        self.ml: _FseTable | None = None
        self.of: _FseTable | None = None
        self.reps = [1, 4, 8]


_PREDEFINED = {
    "ll": _FseTable.build(_LL_DEFAULT, 6),
    "ml": _FseTable.build(_ML_DEFAULT, 6),
    "of": _FseTable.build(_OF_DEFAULT, 5),
}


def _literals(data: bytes | memoryview, pos: int, end: int, frame: _Frame) -> tuple[bytearray, int]:
    if pos >= end:
        raise ZstdError("a compressed block has no literals section")
    first = data[pos]
    kind, size_format = first & 3, (first >> 2) & 3
    if kind in (0, 1):
        if size_format in (0, 2):
            regenerated, pos = first >> 3, pos + 1
        elif size_format == 1:
            if pos + 2 > end:
                raise ZstdError("a literals header is cut short")
            regenerated, pos = (first >> 4) + (data[pos + 1] << 4), pos + 2
        else:
            if pos + 3 > end:
                raise ZstdError("a literals header is cut short")
            regenerated, pos = (first >> 4) + (data[pos + 1] << 4) + (data[pos + 2] << 12), pos + 3
        if regenerated > _BLOCK_MAX:
            raise ZstdError("a literals section is larger than a block")
        if kind == 0:
            if pos + regenerated > end:
                raise ZstdError("raw literals run past their block")
            return bytearray(data[pos:pos + regenerated]), pos + regenerated
        if pos >= end:
            raise ZstdError("RLE literals have no byte")
        return bytearray(data[pos:pos + 1]) * regenerated, pos + 1
    header_size = {0: 3, 1: 3, 2: 4, 3: 5}[size_format]
    if pos + header_size > end:
        raise ZstdError("a literals header is cut short")
    header = int.from_bytes(data[pos:pos + header_size], "little")
    field = {3: 10, 4: 14, 5: 18}[header_size]
    regenerated = (header >> 4) & ((1 << field) - 1)
    compressed = (header >> (4 + field)) & ((1 << field) - 1)
    streams = 1 if size_format == 0 else 4
    pos += header_size
    if regenerated > _BLOCK_MAX or pos + compressed > end:
        raise ZstdError("a compressed literals section has impossible sizes")
    stop = pos + compressed
    if kind == 2:
        frame.huffman, pos = _read_huffman(data, pos, stop)
    elif frame.huffman is None:
        raise ZstdError("treeless literals with no previous Huffman tree")
    huffman = frame.huffman
    out = bytearray()
    if streams == 1:
        huffman.decode(data, pos, stop, regenerated, out)
    else:
        if pos + 6 > stop:
            raise ZstdError("a literals jump table is cut short")
        sizes = [int.from_bytes(data[pos + 2 * i:pos + 2 * i + 2], "little") for i in range(3)]
        pos += 6
        sizes.append(stop - pos - sum(sizes))
        if sizes[3] < 1:
            raise ZstdError("a literals jump table names impossible sizes")
        each = (regenerated + 3) // 4
        if each * 3 > regenerated:
            raise ZstdError("four literal streams cannot share so few literals")
        for index, size in enumerate(sizes):
            count = each if index < 3 else regenerated - 3 * each
            huffman.decode(data, pos, pos + size, count, out)
            pos += size
    return out, stop


def _table(mode: int, data: bytes | memoryview, pos: int, end: int, previous: _FseTable | None, name: str,
           max_symbol: int, max_accuracy: int) -> tuple[_FseTable, int]:
    if mode == 0:
        return _PREDEFINED[name], pos
    if mode == 1:
        if pos >= end:
            raise ZstdError("an RLE sequence table has no symbol")
        if data[pos] > max_symbol:
            raise ZstdError("an RLE sequence symbol is out of range")
        return _FseTable.rle(data[pos]), pos + 1
    if mode == 2:
        stream = _Forward(data, pos, end)
        counts, accuracy = _read_distribution(stream, max_symbol, max_accuracy)
        return _FseTable.build(counts, accuracy), pos + stream.consumed_bytes()
    if previous is None:
        raise ZstdError("a repeated sequence table with no previous table")
    return previous, pos


def _block(data: bytes | memoryview, pos: int, end: int, frame: _Frame, out: bytearray, cap: int,
           window: int) -> None:
    literals, pos = _literals(data, pos, end, frame)
    if pos >= end:
        raise ZstdError("a compressed block has no sequences section")
    first = data[pos]
    if first == 0:
        count, pos = 0, pos + 1
    elif first < 128:
        count, pos = first, pos + 1
    elif first < 255:
        if pos + 2 > end:
            raise ZstdError("a sequence count is cut short")
        count, pos = ((first - 128) << 8) + data[pos + 1], pos + 2
    else:
        if pos + 3 > end:
            raise ZstdError("a sequence count is cut short")
        count, pos = data[pos + 1] + (data[pos + 2] << 8) + 0x7F00, pos + 3
    if count == 0:
        if pos != end:
            raise ZstdError("a block without sequences has trailing bytes")
        _append(out, literals, cap)
        return
    if pos >= end:
        raise ZstdError("a block has no sequence table modes")
    modes = data[pos]
    pos += 1
    if modes & 3:
        raise ZstdError("reserved bits of the sequence table modes are set")
    frame.ll, pos = _table(modes >> 6, data, pos, end, frame.ll, "ll", 35, _LL_MAX_LOG)
    frame.of, pos = _table((modes >> 4) & 3, data, pos, end, frame.of, "of", _OF_MAX_CODE, _OF_MAX_LOG)
    frame.ml, pos = _table((modes >> 2) & 3, data, pos, end, frame.ml, "ml", 52, _ML_MAX_LOG)
    _sequences(data, pos, end, count, frame, literals, out, cap, window)


def _sequences(data: bytes | memoryview, pos: int, end: int, count: int, frame: _Frame, literals: bytearray,
               out: bytearray, cap: int, window: int) -> None:
    """Decode and execute ``count`` sequences. The hot loop of the decoder: the backward bit stream is read
    inline (a local accumulator refilled to at least 96 bits per sequence, enough for its at most 89),
    which is several times faster in CPython than a method call per field."""
    ll, of, ml = frame.ll, frame.of, frame.ml
    assert ll is not None and of is not None and ml is not None
    stream = _Backward(data, pos, end)
    read = stream.read
    ll_state, of_state, ml_state = read(ll.accuracy), read(of.accuracy), read(ml.accuracy)
    acc, nbits, byte_pos, first, used, total = stream.acc, stream.nbits, stream.pos, stream.start, stream.used, \
        stream.total
    ll_symbol, ll_bits_of, ll_base_of = ll.symbol, ll.bits, ll.base
    ml_symbol, ml_bits_of, ml_base_of = ml.symbol, ml.bits, ml.base
    of_symbol, of_bits_of, of_base_of = of.symbol, of.bits, of.base
    ll_codes, ml_codes = _LL_CODES, _ML_CODES
    ll_limit, ml_limit = len(_LL_CODES), len(_ML_CODES)
    reps = frame.reps
    lit_pos = 0
    lit_len_total = len(literals)
    floor = frame.begin
    last = count - 1
    for index in range(count):
        if nbits < 96:  # refill from the bytes below; past the first byte, zeros (counted by `used`)
            take = min(12, byte_pos - first)
            if take > 0:
                acc = (acc << (take * 8)) | int.from_bytes(data[byte_pos - take:byte_pos], "little")
                nbits += take * 8
                byte_pos -= take
            if nbits < 96:
                acc <<= 96 - nbits
                nbits = 96
        of_code = of_symbol[of_state]
        ml_code = ml_symbol[ml_state]
        ll_code = ll_symbol[ll_state]
        if of_code > _OF_MAX_CODE or ml_code >= ml_limit or ll_code >= ll_limit:
            raise ZstdError("a sequence code is out of range")
        nbits -= of_code
        offset_value = (1 << of_code) + ((acc >> nbits) & ((1 << of_code) - 1))
        ml_base, ml_bits = ml_codes[ml_code]
        nbits -= ml_bits
        match_length = ml_base + ((acc >> nbits) & ((1 << ml_bits) - 1))
        ll_base, ll_bits = ll_codes[ll_code]
        nbits -= ll_bits
        literal_length = ll_base + ((acc >> nbits) & ((1 << ll_bits) - 1))
        used += of_code + ml_bits + ll_bits
        if index < last:
            bits = ll_bits_of[ll_state]
            nbits -= bits
            ll_state = ll_base_of[ll_state] + ((acc >> nbits) & ((1 << bits) - 1))
            used += bits
            bits = ml_bits_of[ml_state]
            nbits -= bits
            ml_state = ml_base_of[ml_state] + ((acc >> nbits) & ((1 << bits) - 1))
            used += bits
            bits = of_bits_of[of_state]
            nbits -= bits
            of_state = of_base_of[of_state] + ((acc >> nbits) & ((1 << bits) - 1))
            used += bits
        acc &= (1 << nbits) - 1
        if used > total:
            raise ZstdError("a sequence stream is cut short")
        if offset_value > 3:
            offset = offset_value - 3
            reps[2], reps[1], reps[0] = reps[1], reps[0], offset
        else:
            choice = offset_value if literal_length == 0 else offset_value - 1  # LL 0 shifts the repeat codes
            if choice == 0:
                offset = reps[0]
            elif choice == 3:
                offset = reps[0] - 1
                if offset == 0:
                    raise ZstdError("a repeat offset is zero")
                reps[2], reps[1], reps[0] = reps[1], reps[0], offset
            else:
                offset = reps[choice]
                if choice == 2:
                    reps[2] = reps[1]
                reps[1], reps[0] = reps[0], offset
        if lit_pos + literal_length > lit_len_total:
            raise ZstdError("a sequence uses more literals than the block has")
        if len(out) + literal_length + match_length > cap:
            raise ZstdError("the stream inflates past its cap")
        if literal_length:
            out += literals[lit_pos:lit_pos + literal_length]
            lit_pos += literal_length
        produced = len(out)
        if offset > produced - floor or offset > window:
            raise ZstdError("a match reaches before the start of the output or the window")
        start = produced - offset
        if match_length <= offset:
            out += out[start:start + match_length]
        else:  # an overlapping match repeats the last `offset` bytes
            pattern = out[start:]
            whole, part = divmod(match_length, offset)
            out += pattern * whole + pattern[:part]
    if used != total:
        raise ZstdError("a sequence stream does not end where its sequences do")
    _append(out, literals[lit_pos:], cap)


def _append(out: bytearray, chunk: bytes | bytearray | memoryview, cap: int) -> None:
    if len(out) + len(chunk) > cap:
        raise ZstdError("the stream inflates past its cap")
    out += chunk


# --- frames ----------------------------------------------------------------------------------------------


def _frame(data: bytes | memoryview, pos: int, out: bytearray, cap: int) -> int:
    """Decode one frame starting after its magic number; returns the position after it."""
    end = len(data)
    if pos >= end:
        raise ZstdError("a frame header is cut short")
    descriptor = data[pos]
    pos += 1
    fcs_flag, single, checksum, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, (descriptor >> 2) & 1, descriptor & 3
    if descriptor & 0x08:
        raise ZstdError("a frame header's reserved bit is set")
    window = 0
    if not single:
        if pos >= end:
            raise ZstdError("a frame header is cut short")
        exponent, mantissa = data[pos] >> 3, data[pos] & 7
        base = 1 << (10 + exponent)
        window = base + (base >> 3) * mantissa
        pos += 1
    dict_size = (0, 1, 2, 4)[dict_flag]
    if pos + dict_size > end:
        raise ZstdError("a frame header is cut short")
    if dict_size and int.from_bytes(data[pos:pos + dict_size], "little") != 0:
        raise ZstdError("the frame needs a dictionary, which is not supported")
    pos += dict_size
    fcs_size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if pos + fcs_size > end:
        raise ZstdError("a frame header is cut short")
    content_size: int | None = None
    if fcs_size:
        content_size = int.from_bytes(data[pos:pos + fcs_size], "little") + (256 if fcs_size == 2 else 0)
        pos += fcs_size
    if single:
        window = content_size or 0
    if window > _WINDOW_MAX:
        raise ZstdError(f"a frame's window of {window} bytes is over the {_WINDOW_MAX}-byte maximum")
    if content_size is not None and len(out) + content_size > cap:
        raise ZstdError("the frame declares more content than its cap")
    begin = len(out)
    frame = _Frame(begin)
    block_max = min(window, _BLOCK_MAX) if window else _BLOCK_MAX
    while True:
        if pos + 3 > end:
            raise ZstdError("a block header is cut short")
        header = int.from_bytes(data[pos:pos + 3], "little")
        pos += 3
        last, kind, size = header & 1, (header >> 1) & 3, header >> 3
        if kind == 3:
            raise ZstdError("a block has the reserved type")
        if kind == 1:
            if pos >= end:
                raise ZstdError("an RLE block has no byte")
            if size > block_max:
                raise ZstdError("a block is larger than the maximum block size")
            _append(out, bytes(data[pos:pos + 1]) * size, cap)
            pos += 1
        else:
            if size > block_max or pos + size > end:
                raise ZstdError("a block is larger than its frame or the maximum block size")
            if kind == 0:
                _append(out, data[pos:pos + size], cap)
            else:
                before = len(out)
                _block(data, pos, pos + size, frame, out, cap, window or cap)
                if len(out) - before > block_max:
                    raise ZstdError("a block decodes to more than the maximum block size")
            pos += size
        if last:
            break
    if content_size is not None and len(out) - begin != content_size:
        raise ZstdError("a frame's content does not have its declared size")
    if checksum:
        if pos + 4 > end:
            raise ZstdError("a frame's checksum is cut short")
        pos += 4
    return pos


def decompress(data: bytes, cap: int) -> bytes:
    """The content of one or more Zstandard frames; at most ``cap`` bytes, else :class:`ZstdError`."""
    view = memoryview(data)
    out = bytearray()
    pos = 0
    if not data:
        raise ZstdError("the stream is empty")
    while pos < len(view):
        if pos + 4 > len(view):
            raise ZstdError("trailing bytes after the last frame")
        magic = int.from_bytes(view[pos:pos + 4], "little")
        pos += 4
        if magic == MAGIC:
            pos = _frame(view, pos, out, cap)
        elif magic & _SKIPPABLE_MASK == _SKIPPABLE:
            if pos + 4 > len(view):
                raise ZstdError("a skippable frame is cut short")
            size = int.from_bytes(view[pos:pos + 4], "little")
            pos += 4 + size
            if pos > len(view):
                raise ZstdError("a skippable frame runs past the stream")
        else:
            raise ZstdError("the stream is not Zstandard (bad magic number)")
    return bytes(out)
