//! The store's keys: a slot per tool or upstream name (its [`Cell`], the open interval), at most
//! [`MAX_KEYS`] named ones, and one overflow slot per scope that names past the cap share.
//! The overflow slots are no name's: they are read as [`OTHER`], which no tool or upstream
//! name can be (`(` and `)` are in neither grammar), so a tool named `other` is itself.
//!
//! A slot is released, and its points leave the rings, once no [`super::Handle`] refers to it
//! (the tool or upstream is gone: renamed, removed) and it has had no call for the whole
//! hour ring; its slot is then free for a new name, so the cap does not fill for good with
//! names that were renamed away.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Relaxed},
    fence,
};

use super::dist::{Cell, Dist};
use super::rings::HOUR_FRAMES;
use super::{ALL, MAX_KEYS, OTHER, Query, Scope};

pub struct Slot {
    pub scope: Scope,
    /// `None`: free.
    name: Option<Arc<str>>,
    pub cell: Arc<Cell>,
    /// Intervals closed since its last call (or since it was made).
    pub idle: AtomicU64,
}

impl Slot {
    fn new(scope: Scope, name: Arc<str>) -> Self {
        Self { scope, name: Some(name), cell: Arc::default(), idle: AtomicU64::new(0) }
    }
}

pub struct Keys {
    names: [HashMap<Arc<str>, u32>; 2],
    /// By key id; the first two are the overflow slots (ids [`Scope::Tool`] and
    /// [`Scope::Upstream`]).
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl Default for Keys {
    fn default() -> Self {
        let slots = vec![Slot::new(Scope::Tool, OTHER.into()), Slot::new(Scope::Upstream, OTHER.into())];
        Self { names: [HashMap::new(), HashMap::new()], slots, free: Vec::new() }
    }
}

impl Keys {
    /// The cell of `name` if it has a slot.
    pub fn get(&self, scope: Scope, name: &str) -> Option<&Arc<Cell>> {
        let id = self.id(scope, name)?;
        Some(&self.slots[id as usize].cell)
    }

    /// The cell of `name`, given a slot if it has none (the overflow slot past the cap).
    pub fn insert(&mut self, scope: Scope, name: &str) -> Arc<Cell> {
        if let Some(cell) = self.get(scope, name) {
            return cell.clone();
        }
        if self.named() >= MAX_KEYS {
            return self.slots[scope as usize].cell.clone();
        }
        let name: Arc<str> = name.into();
        let slot = Slot::new(scope, name.clone());
        let cell = slot.cell.clone();
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = slot;
                id
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.names[scope as usize].insert(name, id);
        cell
    }

    /// Named slots in use (the overflow ones not counted).
    pub fn named(&self) -> usize {
        self.slots.len() - 2 - self.free.len()
    }

    /// The key id `query` reads, if it has one.
    pub fn find(&self, query: Query<'_>) -> Option<u32> {
        match query {
            Query::All => Some(ALL),
            Query::Tool(name) => self.id(Scope::Tool, name),
            Query::Upstream(name) => self.id(Scope::Upstream, name),
        }
    }

    fn id(&self, scope: Scope, name: &str) -> Option<u32> {
        if name == OTHER {
            return Some(scope as u32);
        }
        self.names[scope as usize].get(name).copied()
    }

    /// The slots in use, with their ids.
    pub fn live(&self) -> impl Iterator<Item = (u32, &Slot)> {
        self.slots.iter().enumerate().filter(|(_, s)| s.name.is_some()).map(|(id, s)| (id as u32, s))
    }

    /// Key `id`'s open interval so far ([`ALL`]: every tool's together).
    pub fn peek(&self, id: u32) -> Dist {
        if id != ALL {
            return self.slots.get(id as usize).map(|s| s.cell.peek()).unwrap_or_default();
        }
        let mut all = Dist::default();
        self.live().filter(|(_, s)| s.scope == Scope::Tool).for_each(|(_, s)| all.merge(&s.cell.peek()));
        all
    }

    /// Whether slot `id` may be released: a named slot no handle refers to, idle for the hour.
    pub fn releasable(&self, id: u32) -> bool {
        let Some(slot) = self.slots.get(id as usize) else { return false };
        // Only the store holds the cell: no handle can record into it, and none can be made
        // while the caller holds the lock `handle` takes to clone one.
        let unheld = id > Scope::Upstream as u32
            && slot.name.is_some()
            && slot.idle.load(Relaxed) >= HOUR_FRAMES
            && Arc::strong_count(&slot.cell) == 1;
        // The last handle's drop (a Release) happened before: with this fence, so did every
        // call it recorded, and one counted since the last close keeps the slot till the next.
        fence(Acquire);
        unheld && slot.cell.is_empty()
    }

    /// Frees slot `id` if [`Self::releasable`]; the caller purges its points.
    pub fn release(&mut self, id: u32) -> bool {
        if !self.releasable(id) {
            return false;
        }
        let slot = &mut self.slots[id as usize];
        if let Some(name) = slot.name.take() {
            self.names[slot.scope as usize].remove(&name);
        }
        self.free.push(id);
        true
    }
}
