#!/usr/bin/env python3
"""Generate the ABI comparison tables for test_abi.

The reference is the Debian libdapl-dev header set (<dat2/*.h> under --ref);
the candidate is our include/dat2 (--ours).  Every name the reference headers
introduce is enumerated with clang (JSON AST for declarations, -dM -E for
macros); names are told apart from the system headers they pull in by
diffing against a translation unit that includes only those system headers.

What is compared, for every name the reference headers define:
  - typedefs and struct/union/enum tags: present in ours; sizeof; signedness
    of arithmetic typedefs; offsetof and sizeof of every field, recursing
    into named and anonymous nested records; and, by compiling
    __builtin_types_compatible_p checks against ours, that each typedef and
    each field has a compatible type (catches int vs unsigned, pointer
    targets, function-pointer prototypes);
  - enum constants: present and equal in value;
  - functions: present, and the reference prototype redeclared against our
    headers without conflict;
  - macros: present; same kind (object- or function-like); same number of
    parameters; integer-valued ones equal in value and in sizeof; string
    literals equal in content.
Names where softdat deliberately differs are listed in ACCEPTED with the
reason; the test prints them as notes.

Outputs (in --outdir):
  abi_table.c     one table of {key, value}; compiled once against the
                  reference and once against ours (ABI_TABLE names the
                  array), so every value is computed by the real compiler.
  abi_findings.c  problems that cannot be expressed as a value because the
                  code would not compile against ours: names missing from
                  our headers, incompatible types and prototypes, macro kind
                  and arity differences; plus the accepted differences and
                  a line of counts.

test_abi.c links both tables and the findings and reports each difference.
If the reference headers or clang are absent, abi_findings.c carries a
single finding that says so, so the test fails with a readable reason
instead of breaking the build.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HEADERS = ["dat2/udat.h", "dat2/dat_registry.h", "dat2/dat_ib_extensions.h"]
# The reference dat_ib_extensions.h needs struct sockaddr_in6 complete;
# consumers include <netinet/in.h> first, so both sides get the same prelude.
PRELUDE = ["sys/types.h", "stddef.h", "stdio.h", "stdarg.h", "sys/socket.h",
           "netinet/in.h", "inttypes.h"]
CFLAGS = ["-std=gnu11", "-D_GNU_SOURCE", "-x", "c"]

# Reference names where softdat deliberately differs, with the reason.
# Each is reported by the test as accepted; keep this list short.
ACCEPTED = {
    "DAT_IA_HA_RELATED":
        "the reference defines it object-like by mistake (a space before "
        "its parameter list), so no code can use it; ours is the "
        "function-like dispatch macro the specification describes",
}


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def tu_text(with_dat):
    lines = ["#include <%s>" % h for h in PRELUDE]
    if with_dat:
        lines += ["#include <%s>" % h for h in HEADERS]
    return "\n".join(lines) + "\n"


class Clang:
    def __init__(self, clang, incdir, tmp):
        self.clang = clang
        self.inc = ["-I", incdir] if incdir else []
        self.tmp = tmp

    def run(self, text, extra, name="tu.c"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return subprocess.run([self.clang] + CFLAGS + self.inc + extra + [path],
                              capture_output=True, text=True)

    def ast(self, text):
        r = self.run(text, ["-fsyntax-only", "-Xclang", "-ast-dump=json"])
        if r.returncode != 0:
            raise RuntimeError("clang failed:\n" + r.stderr)
        return json.loads(r.stdout)

    def macros(self, text):
        r = self.run(text, ["-dM", "-E"])
        if r.returncode != 0:
            raise RuntimeError("clang -dM -E failed:\n" + r.stderr)
        out = {}
        for line in r.stdout.splitlines():
            if not line.startswith("#define "):
                continue
            rest = line[len("#define "):]
            name = ""
            for ch in rest:
                if ch.isalnum() or ch == "_":
                    name += ch
                else:
                    break
            fnlike = rest[len(name):len(name) + 1] == "("
            out[name] = (fnlike, rest[len(name):].strip())
        return out

    def included_from(self, text, prefix):
        """Headers under `prefix` that the translation unit includes."""
        r = self.run(text, ["-M"])
        deps = r.stdout.replace("\\\n", " ").split()
        return sorted({d for d in deps if os.path.abspath(d).startswith(
            os.path.abspath(prefix) + os.sep)})

    def compiles(self, text):
        return self.run(text, ["-fsyntax-only", "-pedantic-errors",
                               "-Wno-long-long"]).returncode == 0


class Decls:
    """Top-level declarations of one translation unit, by name."""

    def __init__(self, ast):
        self.typedefs = {}      # name -> TypedefDecl node
        self.records = {}       # "struct tag" / "union tag" -> RecordDecl
        self.by_id = {}         # id -> RecordDecl (for typedef'd anonymous)
        self.enumconsts = set()
        self.enums = set()      # "enum tag"
        self.functions = {}     # name -> FunctionDecl
        for n in ast.get("inner", []):
            k = n.get("kind")
            if k == "TypedefDecl" and "name" in n:
                self.typedefs[n["name"]] = n
            elif k == "RecordDecl":
                self.by_id[n["id"]] = n
                if n.get("name") and n.get("completeDefinition"):
                    self.records["%s %s" % (n["tagUsed"], n["name"])] = n
                elif n.get("name"):
                    self.records.setdefault("%s %s" % (n["tagUsed"], n["name"]), n)
            elif k == "EnumDecl":
                if n.get("name"):
                    self.enums.add("enum " + n["name"])
                for c in n.get("inner", []):
                    if c.get("kind") == "EnumConstantDecl":
                        self.enumconsts.add(c["name"])
            elif k == "FunctionDecl" and "name" in n:
                self.functions[n["name"]] = n


def typedef_record(decls, td):
    """The complete RecordDecl a typedef names, or None."""
    for t in walk_types(td.get("inner", [])):
        if t.get("kind") == "RecordType":
            rid = t["decl"]["id"]
            rec = decls.by_id.get(rid)
            if rec is None:
                return None
            if not rec.get("completeDefinition"):
                key = "%s %s" % (rec.get("tagUsed"), rec.get("name"))
                rec = decls.records.get(key)
            return rec if rec is not None and rec.get("completeDefinition") else None
        if t.get("kind") in ("PointerType", "FunctionProtoType",
                             "FunctionNoProtoType", "ConstantArrayType"):
            return None
    return None


def walk_types(nodes):
    for n in nodes:
        yield n
        if n.get("kind") in ("ElaboratedType", "TypedefType", "ParenType",
                             "QualType"):
            yield from walk_types(n.get("inner", []))


def typedef_kind(td):
    """'fn', 'void', 'incomplete' or 'obj' for a typedef."""
    q = td["type"].get("desugaredQualType", td["type"]["qualType"])
    for t in walk_types(td.get("inner", [])):
        kind = t.get("kind")
        if kind in ("FunctionProtoType", "FunctionNoProtoType"):
            return "fn"
        if kind == "BuiltinType" and t["type"]["qualType"] == "void":
            return "void"
        if kind in ("PointerType", "ConstantArrayType", "RecordType",
                    "EnumType", "BuiltinType"):
            break
    if q.strip() == "void":
        return "void"
    return "obj"


def record_fields(decls, rec, prefix, out, depth=0):
    """(designator, field node) for every field, recursing into records."""
    last_nested = None
    for f in rec.get("inner", []):
        k = f.get("kind")
        if k == "RecordDecl":
            last_nested = f
            continue
        if k != "FieldDecl":
            continue
        name = f.get("name")
        q = f["type"]["qualType"]
        nested = None
        if ("unnamed" in q or "anonymous" in q) and last_nested is not None:
            nested = last_nested
        else:
            base = q.replace("const ", "").strip()
            if base in decls.typedefs:
                nested = typedef_record(decls, decls.typedefs[base])
            elif base in decls.records:
                nested = decls.records[base]
                if not nested.get("completeDefinition"):
                    nested = None
        if not name:                     # anonymous struct/union member
            if nested is not None and depth < 8:
                record_fields(decls, nested, prefix, out, depth + 1)
            continue
        desig = prefix + name
        out.append((desig, f))
        if nested is not None and depth < 8:
            record_fields(decls, nested, desig + ".", out, depth + 1)


def integer_macros(cl, names):
    """Names among `names` whose expansion is an integer constant expression.

    A batch is tried first; on failure it is split, so only the few
    non-integer macros (strings, types, empty) cost separate compiles."""
    good = []

    def check(batch):
        body = tu_text(True)
        for i, m in enumerate(batch):
            body += ("static void abi_chk_%d(void) { _Static_assert("
                     "((%s) == (%s)) || 1, \"\"); }\n" % (i, m, m))
        return cl.compiles(body)

    def rec(batch):
        if not batch:
            return
        if check(batch):
            good.extend(batch)
        elif len(batch) > 1:
            mid = len(batch) // 2
            rec(batch[:mid])
            rec(batch[mid:])

    rec(sorted(names))
    return set(good)


def macro_arity(definition):
    """Number of parameters of a function-like macro ("(a,b) body")."""
    params = definition[1:definition.index(")")].strip()
    return 0 if not params else params.count(",") + 1


def string_macros(cl, names):
    """Names among `names` that expand to a string literal."""
    checks = [(n, "static const char abi_s_%d[] = %s;" % (i, n))
              for i, n in enumerate(names)]
    return set(names) - set(failing_checks(cl, checks))


def failing_checks(cl, checks):
    """Labels of the (label, declaration) checks that do not compile.

    All declarations are compiled in one translation unit first; on failure
    the set is split, so only the failing ones cost separate compiles."""
    bad = []

    def rec(batch):
        if not batch:
            return
        body = tu_text(True) + "".join(d + "\n" for _, d in batch)
        if cl.compiles(body):
            return
        if len(batch) == 1:
            bad.append(batch[0][0])
            return
        mid = len(batch) // 2
        rec(batch[:mid])
        rec(batch[mid:])

    rec(list(checks))
    return bad


def spell(q):
    """A clang type spelling made valid as C source: a va_list parameter
    is printed as the pointer it decays to, whose tag is not nameable."""
    return q.replace("struct __va_list_tag *", "va_list")


def usable_type(q):
    """Whether a clang type spelling can be written back as a type name."""
    return not any(w in q for w in ("unnamed", "anonymous", "(lambda",
                                    " at ", "::"))


def write_outputs(outdir, entries, findings, counts, accepted=()):
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "abi_table.c"), "w") as f:
        f.write("/* Generated by test/abi/abi_gen.py; do not edit. */\n")
        if entries:     # with no entries, compile without any DAT header
            f.write(tu_text(True))
        f.write('#include "test/abi/abi_table.h"\n\n')
        f.write("#ifndef ABI_TABLE\n#error define ABI_TABLE\n#endif\n")
        f.write("#define ABI_V(e) ((unsigned long long)(e))\n")
        f.write("#define ABI_NEG(e) ((e) < 0)\n\n")
        f.write("const struct abi_entry ABI_TABLE[] = {\n")
        for key, expr, neg, string in entries:
            f.write("    { %s, ABI_V(%s), %s, %s },\n" % (
                c_str(key), expr, "ABI_NEG(%s)" % neg if neg else "0",
                string if string else "0"))
        f.write("    { 0, 0, 0, 0 }\n};\n")
    with open(os.path.join(outdir, "abi_findings.c"), "w") as f:
        f.write("/* Generated by test/abi/abi_gen.py; do not edit. */\n")
        f.write('#include "test/abi/abi_table.h"\n\n')
        f.write("const char *const abi_findings[] = {\n")
        for s in findings:
            f.write("    %s,\n" % c_str(s))
        f.write("    0\n};\n")
        f.write("const char *const abi_accepted[] = {\n")
        for s in accepted:
            f.write("    %s,\n" % c_str(s))
        f.write("    0\n};\n")
        f.write("const char *const abi_counts = %s;\n" % c_str(counts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default="/usr/include")
    ap.add_argument("--ours", required=True)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--clang", default=os.environ.get("ABI_CLANG", "clang"))
    a = ap.parse_args()

    def fail(msg):
        # No table entries: the test reports the message and fails.
        write_outputs(a.outdir, [], [msg], "nothing compared")
        print("abi_gen: " + msg, file=sys.stderr)
        return 0

    if not os.path.exists(os.path.join(a.ref, "dat2", "udat.h")):
        return fail("reference headers %s/dat2/udat.h not found: install the "
                    "Debian package libdapl-dev (apt-get install libdapl-dev)"
                    % a.ref)
    if shutil.which(a.clang) is None:
        return fail("%s not found: the ABI test needs clang (apt-get install "
                    "clang)" % a.clang)

    tmp = tempfile.mkdtemp(prefix="abi_gen.")
    try:
        ref = Clang(a.clang, None if a.ref == "/usr/include" else a.ref, tmp)
        ours = Clang(a.clang, a.ours, tmp)
        try:
            base_ast = Decls(ref.ast(tu_text(False)))
            base_mac = ref.macros(tu_text(False))
            rd = Decls(ref.ast(tu_text(True)))
            rmac = ref.macros(tu_text(True))
        except RuntimeError as e:
            return fail("cannot parse the reference headers: %s" % e)
        try:
            od = Decls(ours.ast(tu_text(True)))
            omac = ours.macros(tu_text(True))
        except RuntimeError as e:
            return fail("our headers do not compile: %s" % e)

        entries = []        # (key, value expression, sign expression)
        type_checks = []    # (label, C declaration that must compile)
        findings = []
        n_names = 0

        accepted = []

        def finding(name, text):
            if name in ACCEPTED:
                accepted.append("%s (accepted: %s)" % (text, ACCEPTED[name]))
            else:
                findings.append(text)

        def missing(kind, name):
            finding(name, "missing from ours: %s %s" % (kind, name))

        leaked = ours.included_from(tu_text(True), os.path.join(a.ref, "dat2"))
        for path in leaked:
            findings.append("our headers pull in the reference header %s "
                            "(a file is missing from %s/dat2)" % (path, a.ours))

        # ---- typedefs: size (and signedness for arithmetic ones),
        # fields of records recursively
        for name in sorted(set(rd.typedefs) - set(base_ast.typedefs)):
            n_names += 1
            if name not in od.typedefs:
                missing("typedef", name)
                continue
            td = rd.typedefs[name]
            kind = typedef_kind(td)
            q_ref = td["type"]["qualType"]
            if usable_type(q_ref):
                type_checks.append((
                    "typedef %s: reference is %s" % (name, q_ref),
                    "_Static_assert(__builtin_types_compatible_p(%s, %s), "
                    "\"\");" % (name, spell(q_ref))))
            if kind in ("fn", "void"):
                continue
            rec = typedef_record(rd, td)
            if rec is None and "struct" in td["type"].get(
                    "desugaredQualType", td["type"]["qualType"]) and \
                    "*" not in td["type"].get("desugaredQualType", ""):
                continue            # incomplete struct typedef
            entries.append(("sizeof(%s)" % name, "sizeof(%s)" % name, None,
                            False))
            q = td["type"].get("desugaredQualType", td["type"]["qualType"])
            if rec is None and "*" not in q and "[" not in q and \
                    "struct" not in q and "union" not in q:
                entries.append(("signed(%s)" % name, "((%s)-1 < (%s)0)" %
                                (name, name), None, False))
            if rec is not None:
                fields = []
                record_fields(rd, rec, "", fields)
                ofields = []
                orec = typedef_record(od, od.typedefs[name])
                if orec is not None:
                    record_fields(od, orec, "", ofields)
                have = {d for d, _ in ofields}
                for desig, f in fields:
                    if desig not in have:
                        missing("field", "%s.%s" % (name, desig))
                        continue
                    fq = f["type"]["qualType"]
                    if usable_type(fq):
                        type_checks.append((
                            "field %s.%s: reference is %s" % (name, desig, fq),
                            "_Static_assert(__builtin_types_compatible_p("
                            "__typeof__(((%s *)0)->%s), %s), \"\");"
                            % (name, desig, spell(fq))))
                    entries.append(("offsetof(%s, %s)" % (name, desig),
                                    "__builtin_offsetof(%s, %s)" % (name, desig),
                                    None, False))
                    entries.append(("sizeof(%s.%s)" % (name, desig),
                                    "sizeof(((%s *)0)->%s)" % (name, desig),
                                    None, False))

        # ---- struct/union/enum tags
        for tag in sorted(set(rd.records) - set(base_ast.records)):
            n_names += 1
            if tag not in od.records:
                missing("tag", tag)
                continue
            if rd.records[tag].get("completeDefinition") and \
                    od.records[tag].get("completeDefinition"):
                entries.append(("sizeof(%s)" % tag, "sizeof(%s)" % tag, None,
                                False))
            elif rd.records[tag].get("completeDefinition"):
                finding(tag, "incomplete in ours: %s" % tag)
        for tag in sorted(rd.enums - base_ast.enums):
            n_names += 1
            if tag not in od.enums:
                missing("tag", tag)

        # ---- enum constants
        for name in sorted(rd.enumconsts - base_ast.enumconsts):
            n_names += 1
            if name in od.enumconsts or (name in omac and not omac[name][0]):
                entries.append(("enum %s" % name, name, name, False))
            else:
                missing("enum constant", name)

        # ---- functions: presence and a compatible prototype
        fnames = sorted(set(rd.functions) - set(base_ast.functions))
        present = []
        for name in fnames:
            n_names += 1
            if name in od.functions:
                present.append(name)
            else:
                missing("function", name)
        checks = [(n, "extern __typeof__(%s) %s;" % (
            spell(rd.functions[n]["type"]["qualType"]), n)) for n in present]
        for name in failing_checks(ours, checks):
            finding(name, "prototype differs: %s: reference is %s" % (
                name, rd.functions[name]["type"]["qualType"]))
        n_protos = len(present)

        # typedefs and record fields must name compatible types, not just
        # types of the same size (signedness, pointer targets, prototypes)
        n_types = len(type_checks)
        for label in failing_checks(ours, type_checks):
            findings.append("type differs: %s" % label)

        # ---- macros: presence, kind; integer ones by value and size
        mnames = sorted(n for n in set(rmac) - set(base_mac)
                        if not n.startswith("_") or n.startswith("_DAT")
                        or n.startswith("_UDAT"))
        mnames = [n for n in mnames if not n.endswith("_H_")
                  and not n.endswith("_H")]
        objlike = []
        n_fnlike = 0
        for name in mnames:
            n_names += 1
            if name not in omac:
                missing("macro", name)
            elif rmac[name][0] != omac[name][0]:
                finding(name, "macro %s: function-like in one header set "
                        "and object-like in the other" % name)
            elif rmac[name][0]:
                n_fnlike += 1
                ra, oa = macro_arity(rmac[name][1]), macro_arity(omac[name][1])
                if ra != oa:
                    finding(name, "macro %s takes %d arguments, reference "
                            "takes %d" % (name, oa, ra))
            elif rmac[name][1]:
                objlike.append(name)
        r_int = integer_macros(ref, objlike)
        o_int = integer_macros(ours, sorted(r_int))
        for name in sorted(r_int):
            if name not in o_int:
                finding(name, "macro %s is an integer constant in the "
                        "reference but not in ours" % name)
                continue
            entries.append(("macro %s" % name, name, name, False))
            entries.append(("sizeof(macro %s)" % name, "sizeof(%s)" % name,
                            None, False))
        # string-valued macros (attribute names) by content
        r_str = string_macros(ref, sorted(set(objlike) - r_int))
        o_str = string_macros(ours, sorted(r_str))
        for name in sorted(r_str):
            if name not in o_str:
                finding(name, "macro %s is a string in the reference but "
                        "not in ours" % name)
                continue
            entries.append(("string macro %s" % name, "0", None, name))

        counts = ("%d reference names checked (typedefs, struct/union/enum "
                  "tags, enum constants, functions, macros): %d prototypes "
                  "redeclared, %d typedef/field types checked for "
                  "compatibility, %d function-like macros checked for arity, "
                  "%d integer and %d string macros compared by value"
                  % (n_names, n_protos, n_types, n_fnlike, len(r_int),
                     len(r_str)))
        write_outputs(a.outdir, entries, findings, counts, accepted)
        print("abi_gen: %d table entries, %d findings" % (len(entries),
                                                          len(findings)))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
