//! A fast reader for the block-style YAML that Kubernetes tools write (`kubectl get -o
//! yaml`, generators, hand-written manifests): block mappings and sequences, single-line
//! plain and quoted scalars, `{}` and `[]`, comments and `---` markers.
//!
//! It yields, document by document, the events the full parser yields for the same text,
//! and gives up on a document at the first thing outside that subset (anchors, tags,
//! block scalars, flow collections with content, escapes, multi-line scalars, tabs,
//! directives, unusual characters) or that is not valid YAML: the caller then reads
//! from that document on with the full parser, which reads it, or reports its error, as
//! it always has. So this reader never decides what a text means where the two could
//! differ; it only skips the full parser's cost where they cannot.

use std::borrow::Cow;

use saphyr_parser::{Event, ScalarStyle};

/// One event and the line (1-based, in the text read) it starts on.
pub(super) type Located<'t> = (Event<'t>, usize);

/// One document read, or where the reader gave up.
pub(super) enum Next {
    /// A whole document, its events in the caller's buffer (none for an empty document).
    Document,
    /// Read no further: the document that starts at this byte offset, on this line
    /// (1-based), is for the full parser.
    GaveUp { offset: usize, line: usize },
}

/// Why a document is left to the full parser (no further detail is needed: the full
/// parser reads it again).
struct GiveUp;

type Read<T> = Result<T, GiveUp>;

/// A line of the text, or the rest of a line after a sequence entry's `- `.
#[derive(Clone, Copy)]
struct Line<'t> {
    /// 1-based.
    no: usize,
    /// Column of `text`.
    indent: usize,
    /// From the first non-space character to the end of the line.
    text: &'t str,
}

/// Reads the documents of a text one at a time.
pub(super) struct Reader<'t> {
    text: &'t str,
    /// Byte offset of the next line to read.
    at: usize,
    /// Line number of the next line to read.
    line: usize,
}

impl<'t> Reader<'t> {
    pub(super) fn new(text: &'t str) -> Self {
        Reader {
            text,
            at: 0,
            line: 1,
        }
    }

    /// The next document, its events put in `events` (emptied first); `None` at the end
    /// of the text.
    pub(super) fn next_document(&mut self, events: &mut Vec<Located<'t>>) -> Option<Next> {
        events.clear();
        if self.at >= self.text.len() {
            return None;
        }
        let (offset, line) = (self.at, self.line);
        let read = self.opening_marker().and_then(|explicit| {
            let mut doc = Document {
                reader: self,
                peeked: None,
                events,
                depth: 0,
            };
            doc.read(explicit.then_some(line))
        });
        match read {
            Ok(()) => Some(Next::Document),
            Err(GiveUp) => {
                // Nothing after this is read here.
                self.at = self.text.len();
                Some(Next::GaveUp { offset, line })
            }
        }
    }

    /// The next line as it is (without its line feed), and the offset after it.
    fn raw_line(&self) -> Read<Option<(&'t str, usize)>> {
        if self.at >= self.text.len() {
            return Ok(None);
        }
        let rest = &self.text[self.at..];
        let end = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let raw = rest[..end].strip_suffix('\n').unwrap_or(&rest[..end]);
        if !raw.bytes().all(plain_byte) || (!raw.is_ascii() && !raw.chars().all(plain_char)) {
            return Err(GiveUp);
        }
        Ok(Some((raw, self.at + end)))
    }

    /// Steps past a document marker at the reader's position, if there is one.
    fn opening_marker(&mut self) -> Read<bool> {
        match self.raw_line()? {
            Some((raw, after)) if marker(raw)? => {
                self.at = after;
                self.line += 1;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// The next line with content, unless the text or the document ends first.
    fn next_line(&mut self) -> Read<Option<Line<'t>>> {
        while let Some((raw, after)) = self.raw_line()? {
            if marker(raw)? {
                return Ok(None);
            }
            // Directives and document ends.
            if raw.starts_with('%') || raw.starts_with("...") {
                return Err(GiveUp);
            }
            let no = self.line;
            self.at = after;
            self.line += 1;
            let text = raw.trim_start_matches(' ');
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            return Ok(Some(Line {
                no,
                indent: raw.len() - text.len(),
                text,
            }));
        }
        Ok(None)
    }
}

/// Whether a line is a document marker: `---` then the end of the line, or spaces and
/// possibly a comment; content after a marker is left to the full parser.
fn marker(raw: &str) -> Read<bool> {
    let Some(rest) = raw.strip_prefix("---") else {
        return Ok(false);
    };
    if rest.is_empty() {
        return Ok(true);
    }
    if !rest.starts_with(' ') {
        return Ok(false);
    }
    let rest = rest.trim_start_matches(' ');
    if rest.is_empty() || rest.starts_with('#') {
        Ok(true)
    } else {
        Err(GiveUp)
    }
}

/// Bytes read here: printable ASCII, and any byte of a multi-byte character (checked by
/// [`plain_char`]). Tabs and carriage returns are left to the full parser.
fn plain_byte(b: u8) -> bool {
    (0x20..0x7f).contains(&b) || b >= 0x80
}

/// Non-ASCII characters read here: YAML's printable ones that are no line break, byte
/// order mark or non-character.
fn plain_char(c: char) -> bool {
    c.is_ascii()
        || matches!(c, '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
            && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
}

/// One document being read.
struct Document<'r, 't> {
    reader: &'r mut Reader<'t>,
    /// A line looked at and not yet consumed.
    peeked: Option<Line<'t>>,
    events: &'r mut Vec<Located<'t>>,
    /// Collections open (deeper documents are the full parser's, which refuses them; this
    /// reader recurses, and must not run out of stack).
    depth: usize,
}

impl<'t> Document<'_, 't> {
    /// Reads the document; `marker` is the line of its `---`, if it has one.
    fn read(&mut self, marker: Option<usize>) -> Read<()> {
        let Some(first) = self.peek()? else {
            return Ok(()); // an empty document: nothing to build
        };
        self.events.push((
            Event::DocumentStart(marker.is_some()),
            marker.unwrap_or(first.no),
        ));
        self.block(first.indent)?;
        if self.peek()?.is_some() {
            return Err(GiveUp);
        }
        self.events.push((Event::DocumentEnd, self.reader.line));
        Ok(())
    }

    fn peek(&mut self) -> Read<Option<Line<'t>>> {
        if self.peeked.is_none() {
            self.peeked = self.reader.next_line()?;
        }
        Ok(self.peeked)
    }

    fn take(&mut self) -> Read<Line<'t>> {
        self.peek()?;
        self.peeked.take().ok_or(GiveUp)
    }

    /// One more collection open.
    fn deeper(&mut self) -> Read<()> {
        self.depth += 1;
        if self.depth > super::MAX_DEPTH {
            return Err(GiveUp);
        }
        Ok(())
    }

    /// A block collection whose first line (already peeked) is at `indent`.
    fn block(&mut self, indent: usize) -> Read<()> {
        let Some(line) = self.peek()? else {
            return Err(GiveUp);
        };
        if line.indent != indent {
            return Err(GiveUp);
        }
        if entry(line.text).is_some() {
            self.sequence(indent)
        } else {
            self.mapping(indent)
        }
    }

    /// A block sequence whose entries are at `indent`.
    fn sequence(&mut self, indent: usize) -> Read<()> {
        let first = self.peek()?.ok_or(GiveUp)?;
        self.deeper()?;
        self.events.push((Event::SequenceStart(0, None), first.no));
        while let Some(line) = self.peek()? {
            if line.indent < indent {
                break;
            }
            let Some(rest) = entry(line.text).filter(|_| line.indent == indent) else {
                if line.indent == indent {
                    break; // a mapping key after a sequence at its key's indent
                }
                return Err(GiveUp);
            };
            self.take()?;
            let item = rest.trim_start_matches(' ');
            if item.is_empty() || item.starts_with('#') {
                self.nested(line.no, indent, false)?;
            } else if entry(item).is_some() {
                return Err(GiveUp); // `- - x`
            } else {
                let column = line.indent + (line.text.len() - item.len());
                let inner = Line {
                    no: line.no,
                    indent: column,
                    text: item,
                };
                if key(item)?.is_some() {
                    self.peeked = Some(inner);
                    self.mapping(column)?;
                } else {
                    self.value(inner)?;
                    self.after_value(indent)?;
                }
            }
        }
        self.events.push((Event::SequenceEnd, self.reader.line));
        self.depth -= 1;
        Ok(())
    }

    /// A block mapping whose keys are at `indent`.
    fn mapping(&mut self, indent: usize) -> Read<()> {
        let first = self.peek()?.ok_or(GiveUp)?;
        self.deeper()?;
        self.events.push((Event::MappingStart(0, None), first.no));
        while let Some(line) = self.peek()? {
            if line.indent < indent {
                break;
            }
            if line.indent > indent {
                return Err(GiveUp);
            }
            let (name, rest) = key(line.text)?.ok_or(GiveUp)?;
            self.take()?;
            self.events.push((name, line.no));
            let rest = rest.trim_start_matches(' ');
            if rest.is_empty() || rest.starts_with('#') {
                self.nested(line.no, indent, true)?;
            } else {
                let column = line.indent + (line.text.len() - rest.len());
                self.value(Line {
                    no: line.no,
                    indent: column,
                    text: rest,
                })?;
                self.after_value(indent)?;
            }
        }
        self.events.push((Event::MappingEnd, self.reader.line));
        self.depth -= 1;
        Ok(())
    }

    /// The value of a key or entry (on line `no`, at `indent`) whose line ends after its
    /// indicator: a block collection on the next lines (for a key, a sequence may be at
    /// the key's own indent), or nothing (null).
    fn nested(&mut self, no: usize, indent: usize, of_key: bool) -> Read<()> {
        match self.peek()? {
            Some(next) if next.indent > indent => self.block(next.indent),
            Some(next) if of_key && next.indent == indent && entry(next.text).is_some() => {
                self.sequence(indent)
            }
            _ => {
                self.events.push((empty(), no));
                Ok(())
            }
        }
    }

    /// After a value that ended its line: the next line may not be more indented than
    /// the collection (that would continue a multi-line scalar, or be an error).
    fn after_value(&mut self, indent: usize) -> Read<()> {
        match self.peek()? {
            Some(next) if next.indent > indent => Err(GiveUp),
            _ => Ok(()),
        }
    }

    /// A value that starts on a line: a scalar, `{}` or `[]`, alone on the rest of it.
    fn value(&mut self, line: Line<'t>) -> Read<()> {
        let (event, rest) = scalar_or_empty(line.text)?;
        if !rest_is_blank(rest) {
            return Err(GiveUp);
        }
        match event {
            Value::Scalar(e) => self.events.push((e, line.no)),
            Value::Empty(mapping) => {
                let (start, end) = if mapping {
                    (Event::MappingStart(0, None), Event::MappingEnd)
                } else {
                    (Event::SequenceStart(0, None), Event::SequenceEnd)
                };
                self.events.push((start, line.no));
                self.events.push((end, line.no));
            }
        }
        Ok(())
    }
}

enum Value<'t> {
    Scalar(Event<'t>),
    /// `{}` (true) or `[]`.
    Empty(bool),
}

/// The empty scalar the full parser gives for a missing value.
fn empty<'t>() -> Event<'t> {
    Event::Scalar(Cow::Borrowed(""), ScalarStyle::Plain, 0, None)
}

/// The rest of a sequence entry (`- x` → `x`), if the text is one.
fn entry(text: &str) -> Option<&str> {
    match text.strip_prefix('-')? {
        "" => Some(""),
        rest if rest.starts_with(' ') => Some(rest),
        _ => None,
    }
}

/// Whether what follows a value is only spaces and possibly a comment.
fn rest_is_blank(rest: &str) -> bool {
    let trimmed = rest.trim_start_matches(' ');
    trimmed.is_empty() || (trimmed.starts_with('#') && trimmed.len() < rest.len())
}

/// A mapping key at the start of `text`, and what follows its `:`; `None` when the text
/// is no key (then it is a value).
fn key(text: &str) -> Read<Option<(Event<'_>, &str)>> {
    if text.starts_with(['{', '[']) {
        return Ok(None);
    }
    if text.starts_with(['"', '\'']) {
        let (event, rest) = quoted(text)?;
        let rest = rest.trim_start_matches(' ');
        return match rest.strip_prefix(':') {
            Some(after) if after.is_empty() || after.starts_with(' ') => {
                long_key(text, after)?;
                Ok(Some((event, after)))
            }
            _ => Ok(None),
        };
    }
    let Some(end) = plain_end(text)? else {
        return Ok(None);
    };
    let name = text[..end].trim_end_matches(' ');
    long_key(text, &text[end + 1..])?;
    Ok(Some((
        Event::Scalar(Cow::Borrowed(name), ScalarStyle::Plain, 0, None),
        &text[end + 1..],
    )))
}

/// Keys longer than the full parser reads on one line (1,024 characters) are left to it.
fn long_key(text: &str, after: &str) -> Read<()> {
    if text.len() - after.len() > 1000 {
        Err(GiveUp)
    } else {
        Ok(())
    }
}

/// Where the `:` that ends a plain key is (a `:` followed by a space or the end of the
/// line, before any comment), or `None` when the text has none (a plain value).
fn plain_end(text: &str) -> Read<Option<usize>> {
    plain_start(text)?;
    let b = text.as_bytes();
    for i in 0..b.len() {
        match b[i] {
            b':' if b.get(i + 1).is_none_or(|&c| c == b' ') => return Ok(Some(i)),
            b'#' if i > 0 && b[i - 1] == b' ' => return Ok(None),
            _ => {}
        }
    }
    Ok(None)
}

/// A plain scalar must not start with an indicator; `-` followed by a non-space starts
/// one (`-1`), other indicators are left to the full parser.
fn plain_start(text: &str) -> Read<()> {
    let b = text.as_bytes();
    match b.first() {
        None => Err(GiveUp),
        Some(b'-') if b.get(1).is_some_and(|&c| c != b' ') => Ok(()),
        Some(
            b'-' | b'?' | b':' | b',' | b'[' | b']' | b'{' | b'}' | b'#' | b'&' | b'*' | b'!'
            | b'|' | b'>' | b'\'' | b'"' | b'%' | b'@' | b'`',
        ) => Err(GiveUp),
        Some(_) => Ok(()),
    }
}

/// A value at the start of `text`: a plain or quoted scalar, `{}` or `[]`; and what
/// follows it on the line.
fn scalar_or_empty(text: &str) -> Read<(Value<'_>, &str)> {
    if let Some(rest) = text.strip_prefix("{}") {
        return Ok((Value::Empty(true), rest));
    }
    if let Some(rest) = text.strip_prefix("[]") {
        return Ok((Value::Empty(false), rest));
    }
    if text.starts_with(['"', '\'']) {
        let (event, rest) = quoted(text)?;
        return Ok((Value::Scalar(event), rest));
    }
    plain_start(text)?;
    let b = text.as_bytes();
    let mut end = b.len();
    for i in 0..b.len() {
        match b[i] {
            // `a: b: c` and `a: b:` are errors the full parser reports.
            b':' if b.get(i + 1).is_none_or(|&c| c == b' ') => return Err(GiveUp),
            b'#' if i > 0 && b[i - 1] == b' ' => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let value = text[..end].trim_end_matches(' ');
    Ok((
        Value::Scalar(Event::Scalar(
            Cow::Borrowed(value),
            ScalarStyle::Plain,
            0,
            None,
        )),
        &text[value.len()..],
    ))
}

/// A quoted scalar that closes on its line: `'…'` (with `''` for a quote) or `"…"`
/// without escapes; and what follows it.
fn quoted(text: &str) -> Read<(Event<'_>, &str)> {
    if let Some(body) = text.strip_prefix('"') {
        let close = body.find('"').ok_or(GiveUp)?;
        if body[..close].contains('\\') {
            return Err(GiveUp);
        }
        let event = Event::Scalar(
            Cow::Borrowed(&body[..close]),
            ScalarStyle::DoubleQuoted,
            0,
            None,
        );
        return Ok((event, &body[close + 1..]));
    }
    let body = text.strip_prefix('\'').ok_or(GiveUp)?;
    let mut value: Cow<'_, str> = Cow::Borrowed("");
    let mut from = 0;
    loop {
        let close = from + body[from..].find('\'').ok_or(GiveUp)?;
        if body[close + 1..].starts_with('\'') {
            value.to_mut().push_str(&body[from..=close]);
            from = close + 2;
            continue;
        }
        let piece = &body[from..close];
        if from == 0 {
            value = Cow::Borrowed(piece);
        } else {
            value.to_mut().push_str(piece);
        }
        let event = Event::Scalar(value, ScalarStyle::SingleQuoted, 0, None);
        return Ok((event, &body[close + 1..]));
    }
}
