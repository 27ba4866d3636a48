//! Interned names: objects, source files, function names and functions.
//!
//! Names are stored once per profile, as exact bytes (symbol and file names
//! need not be UTF-8), and referred to by small typed ids. They are shared by
//! all parts of a profile so that parts can be summed without remapping.

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;
use std::hash::BuildHasher;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        pub struct $name(pub u32);

        impl $name {
            /// The index of this id in its table.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id_type!(
    /// An ELF object (`ob=`, `cob=`).
    ObjectId
);
id_type!(
    /// A source file (`fl=`, `fi=`, `fe=`, `cfi=`, `jfi=`).
    FileId
);
id_type!(
    /// A function name as written (`fn=`, `cfn=`, `jfn=`).
    SymbolId
);
id_type!(
    /// A function: object + file + name.
    FunctionId
);

impl ObjectId {
    /// No object was named (`ob=` absent, as in Cachegrind files).
    pub const NONE: ObjectId = ObjectId(0);
}

impl FileId {
    /// No file was named.
    pub const NONE: FileId = FileId(0);
}

/// A table of byte strings with stable indices; index 0 is the empty string,
/// which stands for "not given".
#[derive(Clone)]
pub struct Interner {
    offsets: Vec<u32>,
    bytes: Vec<u8>,
    /// The hash of each string: growing the table rehashes from these
    /// instead of from the strings, which in real profiles (context names
    /// of a few hundred bytes, a hundred thousand of them) cost as much as
    /// the rest of interning.
    hashes: Vec<u64>,
    table: HashTable<u32>,
}

impl Default for Interner {
    fn default() -> Self {
        let mut i = Interner {
            offsets: vec![0],
            bytes: Vec::new(),
            hashes: Vec::new(),
            table: HashTable::new(),
        };
        i.intern(b"");
        i
    }
}

impl std::fmt::Debug for Interner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

impl PartialEq for Interner {
    fn eq(&self, other: &Self) -> bool {
        self.offsets == other.offsets && self.bytes == other.bytes
    }
}
impl Eq for Interner {}

#[inline]
fn hash(bytes: &[u8]) -> u64 {
    FxBuildHasher.hash_one(bytes)
}

impl Interner {
    /// Number of strings, including the empty one at index 0.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Always false: index 0 exists from the start.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The string at `index`.
    #[inline]
    pub fn get(&self, index: u32) -> &[u8] {
        let i = index as usize;
        &self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// The index of `s`, adding it if new.
    ///
    /// # Panics
    /// Past 4 GiB of name bytes; readers use [`Interner::try_intern`].
    pub fn intern(&mut self, s: &[u8]) -> u32 {
        self.try_intern(s).expect("name table exceeds 4 GiB")
    }

    /// Makes room for `strings` more strings of `bytes` bytes in all, so
    /// that adding a known batch grows the table once.
    pub fn reserve(&mut self, strings: usize, bytes: usize) {
        self.offsets.reserve(strings);
        self.hashes.reserve(strings);
        self.bytes.reserve(bytes);
        let hashes = &self.hashes;
        self.table.reserve(strings, |&i| hashes[i as usize]);
    }

    /// The index of `s`, adding it if new; `None` if the table would pass
    /// 4 GiB of name bytes.
    pub fn try_intern(&mut self, s: &[u8]) -> Option<u32> {
        self.try_intern_hashed(s, hash(s))
    }

    /// The [`Interner::hash`] of the string at `index`, as stored: a table
    /// built elsewhere is merged into this one without hashing again.
    #[inline]
    pub fn hash_at(&self, index: u32) -> u64 {
        self.hashes[index as usize]
    }

    /// The hash [`Interner::try_intern_hashed`] takes: computed where it is
    /// cheaper (a reader's other thread) than on the interning one.
    #[inline]
    pub fn hash(s: &[u8]) -> u64 {
        hash(s)
    }

    /// [`Interner::try_intern`] with `h`, which must be
    /// [`Interner::hash`]`(s)`.
    pub fn try_intern_hashed(&mut self, s: &[u8], h: u64) -> Option<u32> {
        debug_assert_eq!(h, hash(s), "hash of another string");
        let Self {
            offsets,
            bytes,
            hashes,
            table,
        } = self;
        let get = |i: u32| &bytes[offsets[i as usize] as usize..offsets[i as usize + 1] as usize];
        if let Some(&i) = table.find(h, |&i| get(i) == s) {
            return Some(i);
        }
        let index = u32::try_from(offsets.len() - 1).ok()?;
        let end = u32::try_from(bytes.len() + s.len()).ok()?;
        bytes.extend_from_slice(s);
        offsets.push(end);
        hashes.push(h);
        let hashes = &*hashes;
        table.insert_unique(h, index, |&i| hashes[i as usize]);
        Some(index)
    }

    /// Loads the part of the table where a string of hash `h` would be,
    /// so that interning it soon after does not wait for memory: readers
    /// touch the names of the lines a little ahead of the one they read.
    #[inline]
    pub fn touch(&self, h: u64) {
        std::hint::black_box(self.table.find(h, |_| false).is_some());
    }

    /// The index of `s` if it is present.
    pub fn lookup(&self, s: &[u8]) -> Option<u32> {
        self.lookup_hashed(s, hash(s))
    }

    /// [`Interner::lookup`] with `h`, which must be [`Interner::hash`]`(s)`.
    pub fn lookup_hashed(&self, s: &[u8], h: u64) -> Option<u32> {
        debug_assert_eq!(h, hash(s), "hash of another string");
        self.table.find(h, |&i| self.get(i) == s).copied()
    }

    /// All strings in index order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.len() as u32).map(|i| self.get(i))
    }
}

/// What identifies a function: its object, its file and its name.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct FunctionKey {
    /// The ELF object (`ob=`), or [`ObjectId::NONE`].
    pub object: ObjectId,
    /// The file of the function (`fl=`), or [`FileId::NONE`].
    pub file: FileId,
    /// The name (`fn=`).
    pub name: SymbolId,
}

/// All names of a profile.
#[derive(Clone, Default, Debug, PartialEq, Eq)]
pub struct Names {
    /// ELF objects.
    pub objects: Interner,
    /// Source files.
    pub files: Interner,
    /// Function names.
    pub symbols: Interner,
    functions: Vec<FunctionKey>,
    function_table: FunctionTable,
}

#[derive(Clone, Default)]
struct FunctionTable(HashTable<u32>);

impl std::fmt::Debug for FunctionTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FunctionTable({})", self.0.len())
    }
}
// The table is derived from `functions`; comparing that is enough.
impl PartialEq for FunctionTable {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for FunctionTable {}

impl Names {
    /// Interns an object name.
    pub fn object(&mut self, name: &[u8]) -> ObjectId {
        ObjectId(self.objects.intern(name))
    }

    /// Interns a file name.
    pub fn file(&mut self, name: &[u8]) -> FileId {
        FileId(self.files.intern(name))
    }

    /// Interns a function name.
    pub fn symbol(&mut self, name: &[u8]) -> SymbolId {
        SymbolId(self.symbols.intern(name))
    }

    /// Interns a function.
    ///
    /// # Panics
    /// Past 2^32 functions; readers use [`Names::try_function`].
    pub fn function(&mut self, key: FunctionKey) -> FunctionId {
        self.try_function(key).expect("more than 2^32 functions")
    }

    /// Interns a function; `None` past 2^32 functions.
    pub fn try_function(&mut self, key: FunctionKey) -> Option<FunctionId> {
        let h = FxBuildHasher.hash_one(key);
        let Self {
            functions,
            function_table,
            ..
        } = self;
        if let Some(&i) = function_table.0.find(h, |&i| functions[i as usize] == key) {
            return Some(FunctionId(i));
        }
        let id = u32::try_from(functions.len()).ok()?;
        functions.push(key);
        let functions = &*functions;
        function_table
            .0
            .insert_unique(h, id, |&i| FxBuildHasher.hash_one(functions[i as usize]));
        Some(FunctionId(id))
    }

    /// Makes room for `n` more functions.
    pub fn reserve_functions(&mut self, n: usize) {
        self.functions.reserve(n);
        let functions = &self.functions;
        self.function_table
            .0
            .reserve(n, |&i| FxBuildHasher.hash_one(functions[i as usize]));
    }

    /// Looks a function up without adding it.
    pub fn find_function(&self, key: FunctionKey) -> Option<FunctionId> {
        let h = FxBuildHasher.hash_one(key);
        self.function_table
            .0
            .find(h, |&i| self.functions[i as usize] == key)
            .map(|&i| FunctionId(i))
    }

    /// The key of a function.
    #[inline]
    pub fn key(&self, f: FunctionId) -> FunctionKey {
        self.functions[f.index()]
    }

    /// Number of distinct functions.
    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    /// All functions in id order.
    pub fn functions(&self) -> impl Iterator<Item = (FunctionId, FunctionKey)> + '_ {
        self.functions
            .iter()
            .enumerate()
            .map(|(i, k)| (FunctionId(i as u32), *k))
    }

    /// The name of a function, as bytes.
    pub fn function_name(&self, f: FunctionId) -> &[u8] {
        self.symbols.get(self.key(f).name.0)
    }

    /// The file name of a function, as bytes.
    pub fn function_file(&self, f: FunctionId) -> &[u8] {
        self.files.get(self.key(f).file.0)
    }

    /// The object name of a function, as bytes.
    pub fn function_object(&self, f: FunctionId) -> &[u8] {
        self.objects.get(self.key(f).object.0)
    }

    /// A file name as bytes.
    pub fn file_name(&self, f: FileId) -> &[u8] {
        self.files.get(f.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_stable() {
        let mut i = Interner::default();
        assert_eq!(i.get(0), b"");
        let a = i.intern(b"main");
        let b = i.intern(b"fib'2");
        assert_eq!(i.intern(b"main"), a);
        assert_ne!(a, b);
        assert_eq!(i.get(b), b"fib'2");
        assert_eq!(i.lookup(b"\xff\x00 x"), None);
        let c = i.intern(b"\xff\x00 x");
        assert_eq!(i.lookup(b"\xff\x00 x"), Some(c));
        assert_eq!(i.intern(b""), 0);
        assert_eq!(i.len(), 4);
        let h = Interner::hash(b"fib'2");
        assert_eq!(i.try_intern_hashed(b"fib'2", h), Some(b));
        let d = i.try_intern_hashed(b"other", Interner::hash(b"other"));
        assert_eq!(d, Some(4));
        assert_eq!(i.lookup(b"other"), d);
    }

    #[test]
    fn functions_are_keyed_by_object_file_and_name() {
        let mut n = Names::default();
        let ob = n.object(b"/bin/x");
        let fl = n.file(b"x.c");
        let s = n.symbol(b"main");
        let f1 = n.function(FunctionKey {
            object: ob,
            file: fl,
            name: s,
        });
        let f2 = n.function(FunctionKey {
            object: ObjectId::NONE,
            file: fl,
            name: s,
        });
        assert_ne!(f1, f2);
        assert_eq!(
            n.function(FunctionKey {
                object: ob,
                file: fl,
                name: s
            }),
            f1
        );
        assert_eq!(n.function_name(f2), b"main");
    }
}
