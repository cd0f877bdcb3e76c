//! Jute, ZooKeeper's wire encoding of records: big-endian integers, a one-byte boolean, byte
//! buffers and strings as a 4-byte length then the bytes (length -1 for none), vectors as a
//! 4-byte count then the elements. Reading checks every length against what the frame holds,
//! so a peer that sends garbage gets an error, never a panic or a huge allocation.

/// What a record being read lacks or has wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JuteError(pub(crate) String);

/// Reads the fields of one frame's body in order.
pub(crate) struct Reader<'a> {
    /// The frame's body.
    bytes: &'a [u8],
    /// Where the next field starts.
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader of `bytes` from their start.
    pub(crate) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    /// How many bytes are left to read.
    pub(crate) fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The next `n` bytes, for the field `what`.
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], JuteError> {
        if self.left() < n {
            return Err(JuteError(format!(
                "{what}: {n} bytes needed, {} left in the frame",
                self.left()
            )));
        }
        let taken = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(taken)
    }

    /// The next `N` bytes, for the field `what`.
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], JuteError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N, what)?);
        Ok(array)
    }

    /// A 4-byte integer, for the field `what` (named in the error).
    pub(crate) fn int(&mut self, what: &str) -> Result<i32, JuteError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    /// An 8-byte integer.
    pub(crate) fn long(&mut self, what: &str) -> Result<i64, JuteError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    /// A one-byte boolean.
    pub(crate) fn boolean(&mut self, what: &str) -> Result<bool, JuteError> {
        Ok(self.array::<1>(what)?[0] != 0)
    }

    /// A length or a count: -1 for none, otherwise no more than `unit`-byte elements the frame
    /// can still hold.
    fn length(&mut self, what: &str, unit: usize) -> Result<Option<usize>, JuteError> {
        let length = self.int(what)?;
        if length == -1 {
            return Ok(None);
        }
        let fits = usize::try_from(length)
            .ok()
            .filter(|length| length.saturating_mul(unit) <= self.left());
        match fits {
            Some(length) => Ok(Some(length)),
            None => Err(JuteError(format!(
                "{what}: a length of {length} in a frame with {} bytes left",
                self.left()
            ))),
        }
    }

    /// A buffer; none reads as empty.
    pub(crate) fn buffer(&mut self, what: &str) -> Result<Vec<u8>, JuteError> {
        match self.length(what, 1)? {
            Some(length) => Ok(self.take(length, what)?.to_vec()),
            None => Ok(Vec::new()),
        }
    }

    /// A UTF-8 string; none reads as empty.
    pub(crate) fn string(&mut self, what: &str) -> Result<String, JuteError> {
        let bytes = self.buffer(what)?;
        String::from_utf8(bytes).map_err(|_| JuteError(format!("{what}: not UTF-8")))
    }

    /// A vector of strings; none reads as empty.
    pub(crate) fn strings(&mut self, what: &str) -> Result<Vec<String>, JuteError> {
        let Some(count) = self.length(what, 4)? else {
            return Ok(Vec::new());
        };
        (0..count).map(|_| self.string(what)).collect()
    }
}

/// Appends the fields of a record to a frame's body.
#[derive(Default)]
pub(crate) struct Writer {
    /// The body so far.
    bytes: Vec<u8>,
}

impl Writer {
    /// An empty body.
    pub(crate) fn new() -> Writer {
        Writer::default()
    }

    /// A 4-byte integer.
    pub(crate) fn int(&mut self, value: i32) -> &mut Writer {
        self.bytes.extend_from_slice(&value.to_be_bytes());
        self
    }

    /// An 8-byte integer.
    pub(crate) fn long(&mut self, value: i64) -> &mut Writer {
        self.bytes.extend_from_slice(&value.to_be_bytes());
        self
    }

    /// A one-byte boolean.
    pub(crate) fn boolean(&mut self, value: bool) -> &mut Writer {
        self.bytes.push(u8::from(value));
        self
    }

    /// A buffer, its length first. The caller keeps it under [`MAX_FRAME`] (checked when the
    /// frame is finished), so the length always fits.
    pub(crate) fn buffer(&mut self, value: &[u8]) -> &mut Writer {
        self.int(i32::try_from(value.len()).unwrap_or(i32::MAX));
        self.bytes.extend_from_slice(value);
        self
    }

    /// A UTF-8 string, as a buffer.
    pub(crate) fn string(&mut self, value: &str) -> &mut Writer {
        self.buffer(value.as_bytes())
    }

    /// A vector of strings, its count first.
    pub(crate) fn strings(&mut self, values: &[String]) -> &mut Writer {
        self.int(i32::try_from(values.len()).unwrap_or(i32::MAX));
        for value in values {
            self.string(value);
        }
        self
    }

    /// The frame: the body's length, then the body; `None` if it is over [`MAX_FRAME`].
    pub(crate) fn frame(&self) -> Option<Vec<u8>> {
        if self.bytes.len() > MAX_FRAME {
            return None;
        }
        let length = i32::try_from(self.bytes.len()).ok()?;
        let mut frame = Vec::with_capacity(4 + self.bytes.len());
        frame.extend_from_slice(&length.to_be_bytes());
        frame.extend_from_slice(&self.bytes);
        Some(frame)
    }
}

/// The largest frame body read or written: 16 MiB. The server's own limit (`jute.maxbuffer`)
/// is lower by default; a length above this is not ZooKeeper talking.
pub(crate) const MAX_FRAME: usize = 16 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_back_as_written() {
        let mut writer = Writer::new();
        writer
            .int(-7)
            .long(1 << 40)
            .boolean(true)
            .buffer(b"data")
            .string("/a")
            .strings(&["x".into(), "yz".into()]);
        let frame = writer.frame().expect("small");
        assert_eq!(&frame[..4], &(frame.len() as i32 - 4).to_be_bytes());
        let mut reader = Reader::new(&frame[4..]);
        assert_eq!(reader.int("i"), Ok(-7));
        assert_eq!(reader.long("l"), Ok(1 << 40));
        assert_eq!(reader.boolean("b"), Ok(true));
        assert_eq!(reader.buffer("d"), Ok(b"data".to_vec()));
        assert_eq!(reader.string("s"), Ok("/a".into()));
        assert_eq!(reader.strings("v"), Ok(vec!["x".into(), "yz".into()]));
        assert_eq!(reader.left(), 0);
    }

    #[test]
    fn lengths_beyond_the_frame_are_errors() {
        let mut reader = Reader::new(&[0, 0, 0, 9, b'a']);
        assert!(reader.buffer("b").is_err());
        let mut reader = Reader::new(&[0x7f, 0xff, 0xff, 0xff]);
        assert!(reader.strings("v").is_err());
        let mut reader = Reader::new(&[0xff, 0xff, 0xff, 0xfe]);
        assert!(reader.buffer("b").is_err());
        let mut reader = Reader::new(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(reader.string("s"), Ok(String::new()));
        assert!(Reader::new(&[0, 0]).int("i").is_err());
    }
}
