"""PNG inputs for benches of oxipng: images of several kinds (gradients, noise, flat palettes,
RGBA), generated from seeds, so no image is downloaded. `python3 bench/lib/pngs.py DIR` writes
DIR/train/*.png (seed 1, 256 px) and DIR/held/*.png (seed 2, 320 px): held-out images of
other seeds and sizes than the training ones."""
import os, random, struct, sys, zlib
def png(path, width, height, kind, seed):
    rng = random.Random(seed)
    channels = 4 if kind == "rgba" else 3
    rows = []
    for y in range(height):
        row = bytearray([0])
        for x in range(width):
            if kind == "gradient":
                px = ((x * 255) // width, (y * 255) // height, ((x + y) * 3) % 256)
            elif kind == "noise":
                px = tuple(rng.randrange(256) for _ in range(3))
            elif kind == "palette":
                px = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (250, 250, 250)][((x // 16) + (y // 16)) % 4]
            else:
                px = ((x * 7) % 256, (y * 5) % 256, rng.randrange(64), (x + y) % 256)
            row += bytes(px[:channels])
        rows.append(bytes(row))
    raw = zlib.compress(b"".join(rows), 1)
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6 if channels == 4 else 2, 0, 0, 0)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b""))
root = sys.argv[1]
for part, seed, size in (("train", 1, 256), ("held", 2, 320)):
    os.makedirs(f"{root}/{part}", exist_ok=True)
    for i, kind in enumerate(("gradient", "noise", "palette", "rgba")):
        png(f"{root}/{part}/{kind}.png", size + 16 * i, size, kind, seed * 10 + i)
