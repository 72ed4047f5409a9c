//! `k8s.io/apimachinery/pkg/util/diff.Diff` (v1.34 on): a unified diff, three lines of context,
//! of two values' indented JSON, as `github.com/pmezard/go-difflib` writes it (a port of
//! Python's `difflib`: `SequenceMatcher` without junk heuristics, which only start at 200
//! lines, then `GetGroupedOpCodes` and `WriteUnifiedDiff` without file headers).

use std::collections::HashMap;

/// One edit step: `tag` (`e`qual, `r`eplace, `d`elete, `i`nsert) over `a[i1..i2]`, `b[j1..j2]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OpCode {
    tag: char,
    i1: usize,
    i2: usize,
    j1: usize,
    j2: usize,
}

/// `difflib.GetUnifiedDiffString` of the lines of `a` and `b` (each line keeps its `\n`).
pub(super) fn unified_diff(a: &str, b: &str) -> String {
    let (a, b) = (split_lines(a), split_lines(b));
    let mut out = String::new();
    for group in grouped_opcodes(&a, &b, 3) {
        let (first, last) = (group[0], group[group.len() - 1]);
        out.push_str(&format!("@@ -{} +{} @@\n", format_range(first.i1, last.i2), format_range(first.j1, last.j2)));
        for code in group {
            if code.tag == 'e' {
                for line in &a[code.i1..code.i2] {
                    out.push(' ');
                    out.push_str(line);
                }
                continue;
            }
            if matches!(code.tag, 'r' | 'd') {
                for line in &a[code.i1..code.i2] {
                    out.push('-');
                    out.push_str(line);
                }
            }
            if matches!(code.tag, 'r' | 'i') {
                for line in &b[code.j1..code.j2] {
                    out.push('+');
                    out.push_str(line);
                }
            }
        }
    }
    out
}

/// `SplitLines`: each line with its `\n`, the last one given one too.
fn split_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    match lines.last_mut() {
        Some(last) if !last.ends_with('\n') => last.push('\n'),
        None => lines.push("\n".into()),
        _ => {}
    }
    lines
}

/// `formatRangeUnified`: `start,length`, `start` alone for one line.
fn format_range(start: usize, stop: usize) -> String {
    let mut beginning = start + 1;
    let length = stop - start;
    if length == 1 {
        return beginning.to_string();
    }
    if length == 0 {
        beginning -= 1;
    }
    format!("{beginning},{length}")
}

/// `find_longest_match` without junk: the longest common run, the earliest in `a`, then in `b`.
fn longest_match(
    a: &[String],
    b2j: &HashMap<&str, Vec<usize>>,
    (alo, ahi): (usize, usize),
    (blo, bhi): (usize, usize),
) -> (usize, usize, usize) {
    let (mut best_i, mut best_j, mut best_size) = (alo, blo, 0);
    let mut j2len: HashMap<usize, usize> = HashMap::new();
    for (i, line) in a.iter().enumerate().take(ahi).skip(alo) {
        let mut next = HashMap::new();
        for &j in b2j.get(line.as_str()).map(Vec::as_slice).unwrap_or_default() {
            if j < blo {
                continue;
            }
            if j >= bhi {
                break;
            }
            let k = j.checked_sub(1).and_then(|p| j2len.get(&p)).copied().unwrap_or(0) + 1;
            next.insert(j, k);
            if k > best_size {
                (best_i, best_j, best_size) = (i + 1 - k, j + 1 - k, k);
            }
        }
        j2len = next;
    }
    (best_i, best_j, best_size)
}

/// `GetMatchingBlocks`: the common runs, in order, adjacent ones merged, ending with a sentinel.
fn matching_blocks(a: &[String], b: &[String]) -> Vec<(usize, usize, usize)> {
    let mut b2j: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, line) in b.iter().enumerate() {
        b2j.entry(line.as_str()).or_default().push(j);
    }
    let mut queue = vec![(0, a.len(), 0, b.len())];
    let mut blocks = Vec::new();
    while let Some((alo, ahi, blo, bhi)) = queue.pop() {
        let (i, j, k) = longest_match(a, &b2j, (alo, ahi), (blo, bhi));
        if k > 0 {
            blocks.push((i, j, k));
            if alo < i && blo < j {
                queue.push((alo, i, blo, j));
            }
            if i + k < ahi && j + k < bhi {
                queue.push((i + k, ahi, j + k, bhi));
            }
        }
    }
    blocks.sort_unstable();
    let mut merged: Vec<(usize, usize, usize)> = Vec::new();
    for (i, j, k) in blocks {
        match merged.last_mut() {
            Some(last) if last.0 + last.2 == i && last.1 + last.2 == j => last.2 += k,
            _ => merged.push((i, j, k)),
        }
    }
    merged.push((a.len(), b.len(), 0));
    merged
}

/// `GetOpCodes`.
fn opcodes(a: &[String], b: &[String]) -> Vec<OpCode> {
    let (mut i, mut j) = (0, 0);
    let mut codes = Vec::new();
    for (ai, bj, size) in matching_blocks(a, b) {
        let tag = match (i < ai, j < bj) {
            (true, true) => Some('r'),
            (true, false) => Some('d'),
            (false, true) => Some('i'),
            (false, false) => None,
        };
        if let Some(tag) = tag {
            codes.push(OpCode { tag, i1: i, i2: ai, j1: j, j2: bj });
        }
        (i, j) = (ai + size, bj + size);
        if size > 0 {
            codes.push(OpCode { tag: 'e', i1: ai, i2: i, j1: bj, j2: j });
        }
    }
    codes
}

/// `GetGroupedOpCodes(n)`: the changes with `n` lines of context, split where more than `2n`
/// equal lines separate them.
fn grouped_opcodes(a: &[String], b: &[String], n: usize) -> Vec<Vec<OpCode>> {
    let mut codes = opcodes(a, b);
    if codes.is_empty() {
        codes.push(OpCode { tag: 'e', i1: 0, i2: 1, j1: 0, j2: 1 });
    }
    if let Some(first) = codes.first_mut()
        && first.tag == 'e'
    {
        first.i1 = first.i1.max(first.i2.saturating_sub(n));
        first.j1 = first.j1.max(first.j2.saturating_sub(n));
    }
    if let Some(last) = codes.last_mut()
        && last.tag == 'e'
    {
        last.i2 = last.i2.min(last.i1 + n);
        last.j2 = last.j2.min(last.j1 + n);
    }
    let mut groups = Vec::new();
    let mut group = Vec::new();
    for code in codes {
        let mut code = code;
        if code.tag == 'e' && code.i2 - code.i1 > 2 * n {
            group.push(OpCode { i2: code.i2.min(code.i1 + n), j2: code.j2.min(code.j1 + n), ..code });
            groups.push(std::mem::take(&mut group));
            code.i1 = code.i1.max(code.i2.saturating_sub(n));
            code.j1 = code.j1.max(code.j2.saturating_sub(n));
        }
        group.push(code);
    }
    if !(group.is_empty() || group.len() == 1 && group[0].tag == 'e') {
        groups.push(group);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_changed_line_with_three_of_context() {
        let a = "{\n \"a\": 1,\n \"b\": 2,\n \"c\": 3,\n \"d\": 4,\n \"e\": 5,\n \"f\": 6,\n \"g\": 7\n}";
        let b = a.replace("\"d\": 4", "\"d\": 40");
        assert_eq!(
            unified_diff(a, &b),
            "@@ -2,7 +2,7 @@\n  \"a\": 1,\n  \"b\": 2,\n  \"c\": 3,\n- \"d\": 4,\n+ \"d\": 40,\n  \"e\": 5,\n  \"f\": 6,\n  \"g\": 7\n"
        );
        assert_eq!(unified_diff(a, a), "");
    }
}
