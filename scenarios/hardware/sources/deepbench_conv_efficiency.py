#!/usr/bin/env python3
"""The fraction of a GPU's peak that cuDNN's convolutions reach on ResNet-50's shapes,
from Baidu DeepBench's training results (github.com/baidu-research/DeepBench,
results/train/DeepBench_NV_<GPU>.xlsx): a microbenchmark of single conv layers, forward,
backward-data and backward-filter, each timed alone with cuDNN's fastest algorithm.

Every convolution of torchvision's ResNet-50 (v1.5: stride 2 in the 3x3 conv) takes the
rate of the DeepBench row of the largest batch with its filter size, input and output
channels, stride and input width; a shape without an exact row takes the nearest row with
the same filter size (log distance in channels and width, stride mismatches counted).
Rates are DeepBench's own "TERAFLOPS" columns, which count a direct convolution's FLOPs
(2 x C x K x R x S x P x Q x N) even where cuDNN ran Winograd or FFT, so they compare with
the twin's FLOP counts. The result is sum(FLOPs) / sum(FLOPs / rate) / peak over forward,
backward-data (not for the stem: its input needs no gradient) and backward-filter.

Usage: deepbench_conv_efficiency.py DeepBench_NV_V100.xlsx "Results FP32" 15.7e12
Reads the .xlsx with the standard library only (zip + XML).
"""
import math
import re
import sys
import zipfile


def read_sheet(path, name):
    z = zipfile.ZipFile(path)
    strings = [''.join(re.findall(r'<t[^>]*>([^<]*)</t>', si))
               for si in re.findall(r'<si>(.*?)</si>', z.read('xl/sharedStrings.xml').decode(), re.S)]
    names = re.findall(r'<sheet [^>]*name="([^"]+)"', z.read('xl/workbook.xml').decode())
    xml = z.read(f'xl/worksheets/sheet{names.index(name) + 1}.xml').decode()
    rows = []
    for body in re.findall(r'<row [^>]*>(.*?)</row>', xml, re.S):
        row = []
        for attrs, inner in re.findall(r'<c r="[A-Z]+\d+"([^>]*?)(?:/>|>(.*?)</c>)', body, re.S):
            v = re.search(r'<v>([^<]*)</v>', inner or '')
            v = v.group(1) if v else ''
            row.append(strings[int(v)] if 't="s"' in attrs and v else v)
        rows.append(row)
    return rows


def conv_rows(rows):
    """(W, C, N, K, R, stride, fwd, bwd_data, bwd_filter) of every convolution row."""
    out, inside = [], False
    for r in rows:
        if r and r[0] == 'Convolution':
            inside = True
            continue
        if not inside or len(r) < 21:
            continue
        try:
            w, c, n, k, s = (int(float(r[i])) for i in (1, 3, 4, 5, 6))
            stride = int(float(r[10]))
        except ValueError:
            continue
        rates = []
        for i in (18, 19, 20):
            try:
                rates.append(float(r[i]) * 1e12)
            except ValueError:
                rates.append(None)
        out.append((w, c, n, k, s, stride, *rates))
    return out


def resnet50_convs():
    """(input width, C, K, filter, stride, is_stem) of torchvision resnet50 (v1.5)."""
    convs = [(224, 3, 64, 7, 2, True)]
    cin, size = 64, 56
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for b in range(blocks):
            s = stride if b == 0 else 1
            convs += [(size, cin, width, 1, 1, False), (size, width, width, 3, s, False),
                      (size // s, width, 4 * width, 1, 1, False)]
            if b == 0:
                convs.append((size, cin, 4 * width, 1, s, False))
            cin, size = 4 * width, size // s
    return convs


def nearest(rows, w, c, k, r, stride):
    same = [x for x in rows if x[4] == r]
    batch = max(x[2] for x in same)
    same = [x for x in same if x[2] == batch]
    return min(same, key=lambda x: abs(math.log(x[1] / c)) + abs(math.log(x[3] / k)) + abs(math.log(x[0] / w)) +
               (0 if x[5] == stride else 1))


def main():
    path, sheet, peak = sys.argv[1], sys.argv[2], float(sys.argv[3])
    rows = conv_rows(read_sheet(path, sheet))
    flops_total = time_total = 0.0
    for w, c, k, r, stride, stem in resnet50_convs():
        row = nearest(rows, w, c, k, r, stride)
        p = (w + stride - 1) // stride
        flops = 2 * c * k * r * r * p * p  # per image, one pass
        for rate, needed in zip(row[6:9], (True, not stem, True)):
            if not needed:
                continue
            if rate is None:  # the row omits it (DeepBench's input layers): take the forward rate
                rate = row[6]
            flops_total += flops
            time_total += flops / rate
        print(f"conv {w}x{w} {c}->{k} {r}x{r}/{stride}: DeepBench row W={row[0]} C={row[1]} K={row[3]} "
              f"R={row[4]}/{row[5]} N={row[2]}")
    rate = flops_total / time_total
    print(f"ResNet-50 convolutions: {rate / 1e12:.2f} TFLOPS, {rate / peak:.3f} of {peak / 1e12:.2f} TFLOPS")


if __name__ == "__main__":
    main()
