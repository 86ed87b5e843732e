//! The octree: its build, its centre-of-mass pass and its force walk.
//!
//! This room owns the tree's shape (an arena of [`Node`]s in preorder,
//! linked by indices), how it is built over the bodies (phase 1, which also
//! sorts the bodies into the tree's order), how the moments of one subtree
//! are summed (phase 2) and how one body's force is found (phase 3). It
//! must not know about threads, barriers or who runs which part: `sim`
//! hands it the ranges.
//!
//! # Shape
//! The build partitions the bodies among a cube's eight octants, in place,
//! and recurses into each non-empty octant until at most [`LEAF_CAP`]
//! bodies are left (or [`MAX_DEPTH`] is reached). Nodes are numbered in
//! preorder, so a subtree is the contiguous index range
//! `i..i + size`, and every body of a node is in the contiguous range
//! `first..first + count` of the sorted bodies.
//!
//! # The top two levels are always opened
//! The root and its children (depth < 2) are never accepted as a whole by
//! the force walk, whatever the opening angle: their moments are never
//! used, so the centre-of-mass pass only has to do the subtrees rooted at
//! depth 2, which are independent of each other. This costs a few more
//! interactions per body (a body always sees the up to 64 depth-2 cells
//! separately) and is never less accurate than plain Barnes–Hut.

use crate::body::{Body, axpy};

/// Most bodies in a leaf.
pub const LEAF_CAP: usize = 8;
/// Depth at which a node is a leaf whatever its body count (bodies that
/// close together share a leaf and interact directly).
pub const MAX_DEPTH: u8 = 40;
/// Depth of the nodes whose subtrees the centre-of-mass pass shares out.
pub const SUBTREE_DEPTH: u8 = 2;
/// No node (the end of a node's `kids`).
pub const NONE: u32 = u32::MAX;

/// A cube of the tree.
#[derive(Debug, Clone)]
pub struct Node {
    /// The cube's centre.
    pub centre: [f64; 3],
    /// Half the cube's side.
    pub half: f64,
    /// First of the node's bodies in the sorted bodies.
    pub first: u32,
    /// How many bodies the node holds.
    pub count: u32,
    /// Nodes in the subtree rooted here, this one included.
    pub size: u32,
    /// The non-empty children, in octant order, then [`NONE`].
    pub kids: [u32; 8],
    /// Depth (the root is 0).
    pub depth: u8,
    /// True for a node without children.
    pub leaf: bool,
}

/// A node's mass and centre of mass.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moment {
    /// Total mass.
    pub mass: f64,
    /// Centre of mass.
    pub com: [f64; 3],
}

/// The octree's nodes and the roots of the subtrees the centre-of-mass pass
/// shares out.
#[derive(Debug, Default)]
pub struct Tree {
    /// The nodes, in preorder.
    pub nodes: Vec<Node>,
    /// Roots of the subtrees at [`SUBTREE_DEPTH`], in preorder.
    pub subtrees: Vec<u32>,
    scratch: Vec<Body>,
}

impl Tree {
    /// Rebuilds the tree over `bodies`, sorting them into the tree's order
    /// (stably within each octant).
    pub fn build(&mut self, bodies: &mut [Body]) {
        self.nodes.clear();
        self.subtrees.clear();
        if bodies.is_empty() {
            return;
        }
        let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
        for b in bodies.iter() {
            for d in 0..3 {
                lo[d] = lo[d].min(b.pos[d]);
                hi[d] = hi[d].max(b.pos[d]);
            }
        }
        let centre = [0, 1, 2].map(|d| 0.5 * (lo[d] + hi[d]));
        let half = (0..3).map(|d| 0.5 * (hi[d] - lo[d])).fold(0.0, f64::max);
        // A little room so that no body sits on the cube's far faces.
        let half = if half > 0.0 { half * (1.0 + 1e-9) } else { 1.0 };
        self.scratch.resize(bodies.len(), bodies[0]);
        self.node(bodies, 0, centre, half, 0);
    }

    /// Builds the node of `bodies` (which start at `first` in the sorted
    /// bodies) and its subtree; returns its index.
    fn node(
        &mut self,
        bodies: &mut [Body],
        first: usize,
        centre: [f64; 3],
        half: f64,
        depth: u8,
    ) -> u32 {
        let idx = self.nodes.len() as u32;
        self.nodes.push(Node {
            centre,
            half,
            first: first as u32,
            count: bodies.len() as u32,
            size: 1,
            kids: [NONE; 8],
            depth,
            leaf: true,
        });
        if depth == SUBTREE_DEPTH {
            self.subtrees.push(idx);
        }
        if bodies.len() <= LEAF_CAP || depth >= MAX_DEPTH {
            return idx;
        }
        // Counting sort by octant, through the scratch array.
        let mut counts = [0usize; 8];
        for b in bodies.iter() {
            counts[octant(&b.pos, &centre)] += 1;
        }
        let mut starts = [0usize; 8];
        for o in 1..8 {
            starts[o] = starts[o - 1] + counts[o - 1];
        }
        let mut next = starts;
        let scratch = &mut self.scratch[..bodies.len()];
        for b in bodies.iter() {
            let o = octant(&b.pos, &centre);
            scratch[next[o]] = *b;
            next[o] += 1;
        }
        bodies.copy_from_slice(scratch);
        let mut nkids = 0;
        let q = 0.5 * half;
        for o in 0..8 {
            if counts[o] == 0 {
                continue;
            }
            let c = [0, 1, 2].map(|d| centre[d] + if o >> d & 1 == 1 { q } else { -q });
            let range = starts[o]..starts[o] + counts[o];
            let kid = self.node(&mut bodies[range], first + starts[o], c, q, depth + 1);
            self.nodes[idx as usize].kids[nkids] = kid;
            nkids += 1;
        }
        let size = self.nodes.len() as u32 - idx;
        let node = &mut self.nodes[idx as usize];
        node.leaf = false;
        node.size = size;
        idx
    }

    /// The preorder range of the subtree rooted at `root`.
    pub fn subtree(&self, root: u32) -> std::ops::Range<usize> {
        root as usize..(root + self.nodes[root as usize].size) as usize
    }

    /// Sums the moments of the subtree of nodes `range` (a whole subtree in
    /// preorder) bottom-up, writing `moments` (the same nodes, indexed from
    /// `range.start`).
    pub fn moments(&self, range: std::ops::Range<usize>, bodies: &[Body], moments: &mut [Moment]) {
        let base = range.start;
        for i in range.rev() {
            let node = &self.nodes[i];
            let (mut m, mut mx) = (0.0, [0.0; 3]);
            if node.leaf {
                for b in &bodies[node.first as usize..(node.first + node.count) as usize] {
                    m += b.mass;
                    axpy(&mut mx, b.mass, &b.pos);
                }
            } else {
                for &k in node.kids.iter().take_while(|&&k| k != NONE) {
                    // Kids follow their parent in preorder: done already.
                    let km = moments[k as usize - base];
                    m += km.mass;
                    axpy(&mut mx, km.mass, &km.com);
                }
            }
            let com = if m > 0.0 {
                mx.map(|x| x / m)
            } else {
                node.centre
            };
            moments[i - base] = Moment { mass: m, com };
        }
    }

    /// The acceleration and potential at the sorted body `k` from every
    /// other body, through the tree: a cell of side `s` at distance `r` of
    /// its centre of mass is taken whole when `s < theta r` (and it does
    /// not hold body `k`); Plummer softening `eps2` (softening squared).
    /// `moments` must hold every node at depth 2 or more; `stack` is
    /// scratch.
    pub fn force(
        &self,
        bodies: &[Body],
        moments: &[Moment],
        k: usize,
        theta: f64,
        eps2: f64,
        stack: &mut Vec<u32>,
    ) -> ([f64; 3], f64) {
        let p = bodies[k].pos;
        let theta2 = theta * theta;
        let (mut acc, mut pot) = ([0.0; 3], 0.0);
        let mut add = |mass: f64, at: &[f64; 3]| {
            let d = [at[0] - p[0], at[1] - p[1], at[2] - p[2]];
            let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps2;
            let inv = 1.0 / r2.sqrt();
            let f = mass * inv * inv * inv;
            for j in 0..3 {
                acc[j] += f * d[j];
            }
            pot -= mass * inv;
        };
        stack.clear();
        if !self.nodes.is_empty() {
            stack.push(0);
        }
        while let Some(n) = stack.pop() {
            let node = &self.nodes[n as usize];
            let holds_k = (node.first as usize..(node.first + node.count) as usize).contains(&k);
            if node.depth >= SUBTREE_DEPTH && !holds_k {
                let m = &moments[n as usize];
                let d = [m.com[0] - p[0], m.com[1] - p[1], m.com[2] - p[2]];
                let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                let s = 2.0 * node.half;
                if s * s < theta2 * r2 {
                    add(m.mass, &m.com);
                    continue;
                }
            }
            if node.leaf {
                for (j, b) in bodies[node.first as usize..(node.first + node.count) as usize]
                    .iter()
                    .enumerate()
                {
                    if node.first as usize + j != k {
                        add(b.mass, &b.pos);
                    }
                }
            } else {
                // Pushed last first, so that the kids are visited in order.
                let kids = node.kids.iter().take_while(|&&k| k != NONE);
                let len = stack.len();
                stack.extend(kids);
                stack[len..].reverse();
            }
        }
        (acc, pot)
    }
}

/// The octant of `p` in the cube centred at `c`: bit d set when `p` is on
/// the high side along axis d.
fn octant(p: &[f64; 3], c: &[f64; 3]) -> usize {
    (p[0] >= c[0]) as usize | ((p[1] >= c[1]) as usize) << 1 | ((p[2] >= c[2]) as usize) << 2
}

/// The acceleration and potential at each body from every other by direct
/// summation (in the bodies' order), Plummer softening `eps2`: the
/// reference the tree's forces are checked against.
pub fn direct(bodies: &[Body], eps2: f64) -> Vec<([f64; 3], f64)> {
    bodies
        .iter()
        .enumerate()
        .map(|(i, bi)| {
            let (mut acc, mut pot) = ([0.0; 3], 0.0);
            for (j, bj) in bodies.iter().enumerate() {
                if i == j {
                    continue;
                }
                let d = [0, 1, 2].map(|x| bj.pos[x] - bi.pos[x]);
                let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps2;
                let inv = 1.0 / r2.sqrt();
                for x in 0..3 {
                    acc[x] += bj.mass * inv * inv * inv * d[x];
                }
                pot -= bj.mass * inv;
            }
            (acc, pot)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::plummer;

    /// Every body once in one leaf, inside its cube; subtrees contiguous;
    /// the moments of the depth-2 subtrees sum to the whole mass.
    #[test]
    fn shape_holds_every_body_once_in_its_cube() {
        let mut bodies = plummer(3000, 9);
        let mut ids: Vec<u32> = bodies.iter().map(|b| b.id).collect();
        let mut tree = Tree::default();
        tree.build(&mut bodies);
        let mut seen = vec![0u32; bodies.len()];
        for (i, node) in tree.nodes.iter().enumerate() {
            let range = node.first as usize..(node.first + node.count) as usize;
            for b in &bodies[range.clone()] {
                for d in 0..3 {
                    assert!(
                        (b.pos[d] - node.centre[d]).abs() <= node.half,
                        "body outside node {i}"
                    );
                }
            }
            if node.leaf {
                assert!(node.count as usize <= LEAF_CAP || node.depth >= MAX_DEPTH);
                range.for_each(|k| seen[k] += 1);
            } else {
                let kids: Vec<&Node> = node
                    .kids
                    .iter()
                    .take_while(|&&k| k != NONE)
                    .map(|&k| &tree.nodes[k as usize])
                    .collect();
                assert_eq!(kids.iter().map(|k| k.count).sum::<u32>(), node.count);
                assert_eq!(kids.iter().map(|k| k.size).sum::<u32>() + 1, node.size);
                assert!(kids.iter().all(|k| k.depth == node.depth + 1));
            }
        }
        assert!(seen.iter().all(|&s| s == 1));
        let mut sorted: Vec<u32> = bodies.iter().map(|b| b.id).collect();
        sorted.sort_unstable();
        ids.sort_unstable();
        assert_eq!(sorted, ids, "the build lost or doubled a body");

        assert!(
            tree.subtrees.len() > 8,
            "a 3000-body sphere fills more than 8 depth-2 cells"
        );
        let mut moments = vec![Moment::default(); tree.nodes.len()];
        let mut mass = 0.0;
        for &root in &tree.subtrees {
            assert_eq!(tree.nodes[root as usize].depth, SUBTREE_DEPTH);
            let range = tree.subtree(root);
            tree.moments(range.clone(), &bodies, &mut moments[range]);
            mass += moments[root as usize].mass;
        }
        let in_top_leaves: f64 = tree
            .nodes
            .iter()
            .filter(|n| n.leaf && n.depth < SUBTREE_DEPTH)
            .map(|n| n.count as f64 / bodies.len() as f64)
            .sum();
        assert!(
            (mass + in_top_leaves - 1.0).abs() < 1e-12,
            "{mass} + {in_top_leaves}"
        );
    }

    #[test]
    fn bodies_at_one_point_end_in_one_deep_leaf() {
        let mut bodies = plummer(20, 2);
        for b in &mut bodies {
            b.pos = [0.25; 3];
        }
        let mut tree = Tree::default();
        tree.build(&mut bodies);
        let leaves: Vec<&Node> = tree.nodes.iter().filter(|n| n.leaf).collect();
        assert_eq!(leaves.len(), 1);
        assert_eq!(leaves[0].count, 20);
    }
}
