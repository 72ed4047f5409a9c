//! Issues and their display as cel-go's `common.Errors.ToDisplayString`:
//! `ERROR: <input>:1:8: message`, then the source line and a caret under the column.

/// An expression's text, with its line starts for locations.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// The expression.
    pub text: String,
}

/// One error at a character offset.
#[derive(Debug, Clone, PartialEq)]
pub struct Issue {
    /// Character offset.
    pub pos: usize,
    /// cel-go's message.
    pub message: String,
}

/// An expression that does not compile: its issues, displayed as cel-go's `Issues.Err()` (the
/// text the policy status and the admission's "compilation failed" messages carry).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", .expression.display(.issues))]
pub struct Issues {
    expression: Source,
    issues: Vec<Issue>,
}

impl Issues {
    /// The issues of `expression`; at least one.
    pub fn new(expression: Source, issues: Vec<Issue>) -> Issues {
        Issues { expression, issues }
    }

    /// The issues, in the order they were found.
    pub fn issues(&self) -> &[Issue] {
        &self.issues
    }
}

impl Source {
    /// The source of one expression.
    pub fn new(text: &str) -> Source {
        Source { text: text.to_string() }
    }

    /// 1-based line and 0-based column (in characters) of `pos`.
    fn location(&self, pos: usize) -> (usize, usize) {
        let mut line = 1;
        let mut column = 0;
        for c in self.text.chars().take(pos) {
            if c == '\n' {
                line += 1;
                column = 0;
            } else {
                column += 1;
            }
        }
        (line, column)
    }

    /// `Errors.ToDisplayString`: the issues sorted by position, one block each, joined by newlines.
    pub fn display(&self, issues: &[Issue]) -> String {
        let mut sorted: Vec<&Issue> = issues.iter().collect();
        sorted.sort_by_key(|i| i.pos);
        sorted.dedup_by(|a, b| a.pos == b.pos && a.message == b.message);
        sorted.iter().map(|i| self.display_one(i)).collect::<Vec<_>>().join("\n")
    }

    fn display_one(&self, issue: &Issue) -> String {
        let (line, column) = self.location(issue.pos);
        let mut out = format!("ERROR: <input>:{line}:{}: {}", column + 1, issue.message);
        if let Some(snippet) = self.text.split('\n').nth(line - 1) {
            let snippet = snippet.replace('\t', " ");
            out.push_str("\n | ");
            out.push_str(&snippet);
            out.push_str("\n | ");
            let mut chars = snippet.chars();
            for _ in 0..column {
                match chars.next() {
                    Some(c) if c.len_utf8() > 1 => out.push('\u{FF0E}'),
                    Some(_) => out.push('.'),
                    None => break,
                }
            }
            out.push(if chars.next().is_some_and(|c| c.len_utf8() > 1) { '\u{FF3E}' } else { '^' });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_as_cel_go() {
        let source = Source::new("object.foo == 'bar'");
        let text = source.display(&[Issue { pos: 6, message: "undefined field 'foo'".into() }]);
        assert_eq!(text, "ERROR: <input>:1:7: undefined field 'foo'\n | object.foo == 'bar'\n | ......^");
    }
}
