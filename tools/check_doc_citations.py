#!/usr/bin/env python3
"""Checks that every document the code cites exists in docs/ and holds the cited sections.

Citations look like `docs/tasks.md §3.5`, `docs/rwkvq-format.md §1.1-1.4`, `docs/rwkvx.md §2-3`
or, inside the server, `serving.md §3.1` (the prefix may be left out for a file that exists in
docs/). A section N is present when docs/<file> has a Markdown heading whose text starts with
"N " (e.g. `### 3.5 Fingerprint`). Scans the source folders and README.md; prints each broken
citation as FILE:LINE and exits 1 if there is any. Run by ctest as `docs_citations`.

  tools/check_doc_citations.py [REPO_ROOT]
"""
import os
import re
import sys

SCANNED = ['src', 'include', 'cli', 'server', 'replicas', 'python', 'tests', 'tools', 'bench',
           'scripts', 'README.md']
SKIPPED_DIRS = {'node_modules', '__pycache__', 'corpus', 'regressions'}
SUFFIXES = ('.h', '.cpp', '.c', '.py', '.sh', '.md', '.txt', '.js', '.mjs', '.S', '.cmake')
SECTION = r'([0-9]+(?:\.[0-9]+)*)'
CITE = re.compile(r'(docs/)?([A-Za-z0-9_-]+)\.md[`\'")\]]*(?:[ ,:;]*\s*§\s*' + SECTION +
                  r'(?:\s*[-–]\s*' + SECTION + r')?)?')


def headings(path):
    found = set()
    with open(path, encoding='utf-8') as f:
        for line in f:
            m = re.match(r'#+\s+' + SECTION + r'\b', line)
            if m:
                found.add(m.group(1))
    return found


def files(root):
    for top in SCANNED:
        p = os.path.join(root, top)
        if os.path.isfile(p):
            yield p
            continue
        for d, subdirs, names in os.walk(p):
            subdirs[:] = [s for s in subdirs if s not in SKIPPED_DIRS and not s.startswith('.')]
            for n in names:
                if n.endswith(SUFFIXES):
                    yield os.path.join(d, n)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), '..'))
    docs = os.path.join(root, 'docs')
    ours = {n[:-3] for n in os.listdir(docs) if n.endswith('.md')} if os.path.isdir(docs) else set()
    sections = {n: headings(os.path.join(docs, n + '.md')) for n in ours}
    bad, cites = [], 0
    for path in files(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding='utf-8', errors='replace') as f:
            for no, line in enumerate(f, 1):
                for m in CITE.finditer(line):
                    prefixed, name, first, last = m.group(1), m.group(2), m.group(3), m.group(4)
                    if not prefixed and name not in ours:
                        continue  # README.md, some_other.md: not a docs/ citation
                    if prefixed and line[max(0, m.start() - 10):m.start()].endswith('shared/'):
                        bad.append(f'{rel}:{no}: cites ../shared/docs ({name}.md): cite the '
                                   f"repo's own docs/{name}.md")
                        continue
                    cites += 1
                    if name not in ours:
                        bad.append(f'{rel}:{no}: docs/{name}.md does not exist')
                        continue
                    for s in (first, last):
                        if s and s not in sections[name]:
                            bad.append(f'{rel}:{no}: docs/{name}.md has no section {s} '
                                       f'(a heading "## {s} ...")')
    for b in bad:
        print(b)
    print(f'{cites} citations of docs/ checked, {len(bad)} broken')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
