#!/usr/bin/env python3
"""Writes a copy of a safetensors checkpoint with outlier input channels: the given input columns
(last axis) of every tensor whose name matches a regular expression are multiplied by a factor.

For checking how quantisers cope with outlier channels (README, *INT8 weights at load*): with
matrices [out, in] this scales input columns of the weights (weight outliers); with 1-D tensors
such as `blocks.N.ln1.weight` / `.bias` it scales channels of the normalised activations
(activation outliers). F32, F16 and BF16 tensors; values are rounded to the stored type (nearest,
ties to even). Pure Python, no third-party modules.

  tools/scale_columns.py IN OUT --tensors 'blocks\\.\\d+\\.att\\.key\\.weight' --columns 100,500 --factor 50
"""
import argparse
import json
import re
import shutil
import struct
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('input')
    ap.add_argument('output')
    ap.add_argument('--tensors', required=True, help='regular expression (full match) on tensor names')
    ap.add_argument('--columns', required=True, help='comma-separated input-column indices')
    ap.add_argument('--factor', type=float, required=True)
    a = ap.parse_args()
    if a.input == a.output:
        sys.exit('scale_columns: OUT must differ from IN')
    cols = [int(c) for c in a.columns.split(',')]
    pat = re.compile(a.tensors)
    with open(a.input, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
    base = 8 + n
    shutil.copyfile(a.input, a.output)
    touched = []
    with open(a.output, 'r+b') as f:
        for name, t in header.items():
            if name == '__metadata__' or not pat.fullmatch(name):
                continue
            dt, shape, (b0, b1) = t['dtype'], t['shape'], t['data_offsets']
            size = {'F32': 4, 'F16': 2, 'BF16': 2}.get(dt)
            if size is None:
                sys.exit(f'scale_columns: {name} is {dt}; only F32, F16, BF16')
            inner = shape[-1]
            rows = (b1 - b0) // size // inner
            for c in cols:
                if c >= inner:
                    sys.exit(f'scale_columns: column {c} is outside {name} {shape}')
            for r in range(rows):
                for c in cols:
                    off = base + b0 + (r * inner + c) * size
                    f.seek(off)
                    raw = f.read(size)
                    if dt == 'F32':
                        v = struct.unpack('<f', raw)[0] * a.factor
                        out = struct.pack('<f', v)
                    elif dt == 'F16':
                        v = struct.unpack('<e', raw)[0] * a.factor
                        out = struct.pack('<e', v)
                    else:  # BF16: widen, scale in double, round the fp32 bits to nearest-even bf16
                        v = struct.unpack('<f', b'\0\0' + raw)[0] * a.factor
                        u = struct.unpack('<I', struct.pack('<f', v))[0]
                        u = (u + 0x7fff + ((u >> 16) & 1)) >> 16
                        out = struct.pack('<H', u)
                    f.seek(off)
                    f.write(out)
            touched.append(name)
    if not touched:
        sys.exit('scale_columns: no tensor matches ' + a.tensors)
    print(f'scaled columns {cols} by {a.factor} in {len(touched)} tensors: {touched[0]} ...')


if __name__ == '__main__':
    main()
