//! The help's own paragraphs and tables, laid out as `--help` lays out its lists.

/// `rows` under `title`, in two columns, as `--help` shows its lists.
pub fn table(title: &str, rows: &[(&str, &str)]) -> String {
    format!("{title}:\n{}", columns(rows))
}

/// `Examples:`, each example's description (wrapped) above its command line (never wrapped,
/// so that it can be copied whole).
pub fn examples(examples: &[(&str, &str)]) -> String {
    let lines: Vec<String> = examples
        .iter()
        .map(|(what, line)| {
            let what = wrap(&format!("{what}:"), WIDTH - 2).join("\n  ");
            format!("  {what}\n    {line}")
        })
        .collect();
    format!("Examples:\n{}", lines.join("\n"))
}

/// How wide the help's own paragraphs and tables are: clap wraps what is wider, but only to
/// the terminal's width, and without their indentation.
pub const WIDTH: usize = 80;

/// `rows` in two columns, indented, each meaning wrapped within [`WIDTH`] under itself.
pub fn columns(rows: &[(&str, &str)]) -> String {
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let lines: Vec<String> = rows
        .iter()
        .map(|(name, meaning)| {
            let indent = " ".repeat(2 + width + 2);
            let text = wrap(meaning, WIDTH - indent.len()).join(&format!("\n{indent}"));
            format!("  {name:<width$}  {text}")
        })
        .collect();
    lines.join("\n")
}

/// `text` as lines of at most `width` characters, broken between words.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}
