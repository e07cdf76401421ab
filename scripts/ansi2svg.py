#!/usr/bin/env python3
"""Turns `tmux capture-pane -e -p` output (text with SGR escapes) into an SVG picture.

Usage: ansi2svg.py IN.ansi OUT.svg [COLUMNS ROWS]
"""
import html
import re
import sys

PALETTE = [
    "#1d1f21", "#cc6666", "#8abe5b", "#e6c547", "#6f9fd8", "#b294bb", "#70c0b1", "#c5c8c6",
    "#666666", "#ff6c6b", "#a6e22e", "#f0d75c", "#81a2ff", "#d7a0f0", "#8ae3d6", "#ffffff",
]
DEFAULT_FG, DEFAULT_BG = "#d8dee9", "#15171c"


def xterm(n):
    if n < 16:
        return PALETTE[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[n // 6 % 6], steps[n % 6])
    v = 8 + (n - 232) * 10
    return "#%02x%02x%02x" % (v, v, v)


def apply_sgr(params, st):
    p = [int(x) if x else 0 for x in params.split(";")] if params else [0]
    i = 0
    while i < len(p):
        c = p[i]
        if c == 0:
            st.update(fg=None, bg=None, bold=False, rev=False, ul=False, dim=False)
        elif c == 1:
            st["bold"] = True
        elif c == 2:
            st["dim"] = True
        elif c == 4:
            st["ul"] = True
        elif c == 7:
            st["rev"] = True
        elif c == 22:
            st["bold"] = st["dim"] = False
        elif c == 24:
            st["ul"] = False
        elif c == 27:
            st["rev"] = False
        elif 30 <= c <= 37:
            st["fg"] = PALETTE[c - 30]
        elif 90 <= c <= 97:
            st["fg"] = PALETTE[c - 90 + 8]
        elif c == 39:
            st["fg"] = None
        elif 40 <= c <= 47:
            st["bg"] = PALETTE[c - 40]
        elif 100 <= c <= 107:
            st["bg"] = PALETTE[c - 100 + 8]
        elif c == 49:
            st["bg"] = None
        elif c in (38, 48) and i + 1 < len(p):
            key = "fg" if c == 38 else "bg"
            if p[i + 1] == 5 and i + 2 < len(p):
                st[key] = xterm(p[i + 2])
                i += 2
            elif p[i + 1] == 2 and i + 4 < len(p):
                st[key] = "#%02x%02x%02x" % tuple(p[i + 2:i + 5])
                i += 4
        i += 1


def main():
    src, dst = sys.argv[1], sys.argv[2]
    text = open(src, encoding="utf-8", errors="replace").read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    cols = int(sys.argv[3]) if len(sys.argv) > 3 else 160
    rows = int(sys.argv[4]) if len(sys.argv) > 4 else len(lines)
    cw, ch = 8.4, 17
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{cols * cw:.0f}" height="{rows * ch + 8}" '
        f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="14">',
        f'<rect width="100%" height="100%" fill="{DEFAULT_BG}"/>',
    ]
    st = dict(fg=None, bg=None, bold=False, rev=False, ul=False, dim=False)
    token = re.compile(r"\x1b\[([0-9;]*)m|\x1b\[[0-9;?]*[A-Za-z]|\x1b.|(.)", re.S)
    for y, line in enumerate(lines[:rows]):
        x = 0
        runs = []  # (x, text, fg, bg, bold, ul)
        for m in token.finditer(line):
            if m.group(1) is not None:
                apply_sgr(m.group(1), st)
                continue
            c = m.group(2)
            if c is None:
                continue
            fg = st["fg"] or DEFAULT_FG
            bg = st["bg"]
            if st["rev"]:
                fg, bg = (bg or DEFAULT_BG), fg
            key = (fg, bg, st["bold"], st["ul"], st["dim"])
            if runs and runs[-1][0] == key and runs[-1][1] + len(runs[-1][2]) == x:
                runs[-1][2] += c
            else:
                runs.append([key, x, c])
            x += 1
        for (fg, bg, bold, ul, dim), x0, s in runs:
            px, py = x0 * cw, y * ch + 4
            if bg:
                out.append(f'<rect x="{px:.1f}" y="{py}" width="{len(s) * cw:.1f}" height="{ch}" fill="{bg}"/>')
            if s.strip():
                attrs = f'fill="{fg}"'
                if bold:
                    attrs += ' font-weight="bold"'
                if ul:
                    attrs += ' text-decoration="underline"'
                if dim:
                    attrs += ' opacity="0.6"'
                out.append(
                    f'<text x="{px:.1f}" y="{py + ch - 4}" {attrs} xml:space="preserve" '
                    f'textLength="{len(s) * cw:.1f}" lengthAdjust="spacingAndGlyphs">{html.escape(s)}</text>'
                )
    out.append("</svg>")
    open(dst, "w", encoding="utf-8").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
