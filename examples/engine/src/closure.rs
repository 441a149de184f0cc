//! Syntax tree to a tree of boxed closures ("closure compilation"): every node is an indirect
//! call, the shape of many real query engines' expression evaluators.

use crate::parse::{BinOp, Expr};

pub type Compiled = Box<dyn Fn(&[i64]) -> i64 + Send + Sync>;

pub fn compile_closure(expr: &Expr) -> Compiled {
    match expr {
        Expr::Col(c) => {
            let c = *c as usize;
            Box::new(move |row| row[c])
        }
        Expr::Lit(v) => {
            let v = *v;
            Box::new(move |_| v)
        }
        Expr::Bin(op, a, b) => {
            let (a, b) = (compile_closure(a), compile_closure(b));
            match op {
                BinOp::Add => Box::new(move |r| a(r).wrapping_add(b(r))),
                BinOp::Sub => Box::new(move |r| a(r).wrapping_sub(b(r))),
                BinOp::Mul => Box::new(move |r| a(r).wrapping_mul(b(r))),
                BinOp::Div => Box::new(move |r| a(r).checked_div(b(r)).unwrap_or(0)),
                BinOp::Rem => Box::new(move |r| a(r).checked_rem(b(r)).unwrap_or(0)),
                BinOp::Lt => Box::new(move |r| (a(r) < b(r)) as i64),
                BinOp::Le => Box::new(move |r| (a(r) <= b(r)) as i64),
                BinOp::Gt => Box::new(move |r| (a(r) > b(r)) as i64),
                BinOp::Ge => Box::new(move |r| (a(r) >= b(r)) as i64),
                BinOp::Eq => Box::new(move |r| (a(r) == b(r)) as i64),
                BinOp::Ne => Box::new(move |r| (a(r) != b(r)) as i64),
            }
        }
        Expr::And(a, b) => {
            let (a, b) = (compile_closure(a), compile_closure(b));
            Box::new(move |r| (a(r) != 0 && b(r) != 0) as i64)
        }
        Expr::Or(a, b) => {
            let (a, b) = (compile_closure(a), compile_closure(b));
            Box::new(move |r| (a(r) != 0 || b(r) != 0) as i64)
        }
        Expr::Not(a) => {
            let a = compile_closure(a);
            Box::new(move |r| (a(r) == 0) as i64)
        }
        Expr::Neg(a) => {
            let a = compile_closure(a);
            Box::new(move |r| a(r).wrapping_neg())
        }
        Expr::Abs(a) => {
            let a = compile_closure(a);
            Box::new(move |r| a(r).wrapping_abs())
        }
        Expr::Min(a, b) => {
            let (a, b) = (compile_closure(a), compile_closure(b));
            Box::new(move |r| a(r).min(b(r)))
        }
        Expr::Max(a, b) => {
            let (a, b) = (compile_closure(a), compile_closure(b));
            Box::new(move |r| a(r).max(b(r)))
        }
        Expr::If(c, a, b) => {
            let (c, a, b) = (compile_closure(c), compile_closure(a), compile_closure(b));
            Box::new(move |r| if c(r) != 0 { a(r) } else { b(r) })
        }
        Expr::Between(x, lo, hi) => {
            let (x, lo, hi) = (compile_closure(x), compile_closure(lo), compile_closure(hi));
            Box::new(move |r| {
                let v = x(r);
                (lo(r) <= v && v <= hi(r)) as i64
            })
        }
    }
}
