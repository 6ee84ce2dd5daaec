"""Seeds fuzz/corpus/<target>/ with the inputs of the selector unit-test tables.

Usage, from the repository root: python3 fuzz/seed_corpus.py . fuzz/corpus
"""
import hashlib, os, re, sys

ESC = {'n': '\n', 't': '\t', 'r': '\r', '0': '\0', '\\': '\\', '"': '"', "'": "'"}

def literals(src):
    i, out = 0, []
    while i < len(src):
        m = re.match(r'r(#*)"', src[i:])
        if m and (i == 0 or not (src[i-1].isalnum() or src[i-1] == '_')):
            hashes = m.group(1)
            end = src.index('"' + hashes, i + len(m.group(0)))
            out.append(src[i + len(m.group(0)):end])
            i = end + 1 + len(hashes)
            continue
        if src[i] == '"':
            j, s = i + 1, []
            while src[j] != '"':
                if src[j] == '\\':
                    c = src[j+1]
                    if c == 'u':
                        k = src.index('}', j)
                        s.append(chr(int(src[j+3:k], 16))); j = k + 1; continue
                    s.append(ESC[c]); j += 2; continue
                s.append(src[j]); j += 1
            out.append(''.join(s)); i = j + 1
            continue
        if src[i] == "'" and re.match(r"'(\\.|[^\\'])'", src[i:]):  # char literal
            i += len(re.match(r"'(\\.|[^\\'])'", src[i:]).group(0)); continue
        if src.startswith('//', i):
            i = src.index('\n', i); continue
        i += 1
    return out

def block(src, start, end_marker):
    a = src.index(start)
    return src[a:src.index(end_marker, a)]

root = sys.argv[1]
label = open(f"{root}/pkg/selector/src/label.rs").read()
field = open(f"{root}/pkg/selector/src/field.rs").read()
seeds = {
    "label_selector": literals(block(label, "const VALID:", "];"))
    + literals(block(label, "const INVALID:", "];"))
    + literals(block(label, "const GT_LT_MATCHING:", "];"))
    + literals(block(label, "fn error_messages", "for (input")),
    "field_selector": literals(block(field, "const VALID:", "]\n    };"))
    + literals(block(field, "fn invalid_selectors", "for (input"))
    + literals(block(field, "let cases = [", "];")),
}
for target, items in seeds.items():
    d = f"{sys.argv[2]}/{target}"
    os.makedirs(d, exist_ok=True)
    n = 0
    for s in set(items):
        if s.startswith(("invalid label", "invalid field")):
            continue  # error messages, not inputs
        b = s.encode()
        open(f"{d}/{hashlib.sha1(b).hexdigest()}", "wb").write(b)
        n += 1
    print(target, n, "seeds")
