//! Syntax tree to stack bytecode, and the interpreter that runs it once per row.

use crate::parse::{BinOp, Expr};

#[derive(Debug, Clone, Copy)]
pub enum Op {
    Col(u8),
    Lit(i64),
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    Not,
    Neg,
    Abs,
    Min,
    Max,
    Between,
    /// Normalises the top of the stack to 0 or 1.
    Bool,
    /// Pops; jumps when the value was 0.
    JumpIfFalse(u32),
    /// Jumps keeping the top when it is 0, else pops it (short-circuit `and`).
    JumpIfFalseOrPop(u32),
    /// Jumps keeping the top when it is not 0, else pops it (short-circuit `or`).
    JumpIfTrueOrPop(u32),
    Jump(u32),
}

#[derive(Debug, Clone)]
pub struct Program {
    ops: Vec<Op>,
}

pub fn compile(expr: &Expr) -> Program {
    let mut ops = Vec::new();
    emit(expr, &mut ops);
    Program { ops }
}

fn emit(expr: &Expr, ops: &mut Vec<Op>) {
    match expr {
        Expr::Col(c) => ops.push(Op::Col(*c)),
        Expr::Lit(v) => ops.push(Op::Lit(*v)),
        Expr::Bin(op, a, b) => {
            emit(a, ops);
            emit(b, ops);
            ops.push(match op {
                BinOp::Add => Op::Add,
                BinOp::Sub => Op::Sub,
                BinOp::Mul => Op::Mul,
                BinOp::Div => Op::Div,
                BinOp::Rem => Op::Rem,
                BinOp::Lt => Op::Lt,
                BinOp::Le => Op::Le,
                BinOp::Gt => Op::Gt,
                BinOp::Ge => Op::Ge,
                BinOp::Eq => Op::Eq,
                BinOp::Ne => Op::Ne,
            });
        }
        Expr::And(a, b) | Expr::Or(a, b) => {
            emit(a, ops);
            let jump = ops.len();
            ops.push(Op::Jump(0));
            emit(b, ops);
            ops.push(Op::Bool);
            let target = ops.len() as u32;
            ops[jump] = if matches!(expr, Expr::And(..)) {
                Op::JumpIfFalseOrPop(target)
            } else {
                Op::JumpIfTrueOrPop(target)
            };
        }
        Expr::Not(a) => {
            emit(a, ops);
            ops.push(Op::Not);
        }
        Expr::Neg(a) => {
            emit(a, ops);
            ops.push(Op::Neg);
        }
        Expr::Abs(a) => {
            emit(a, ops);
            ops.push(Op::Abs);
        }
        Expr::Min(a, b) | Expr::Max(a, b) => {
            emit(a, ops);
            emit(b, ops);
            ops.push(if matches!(expr, Expr::Min(..)) {
                Op::Min
            } else {
                Op::Max
            });
        }
        Expr::Between(x, low, high) => {
            emit(x, ops);
            emit(low, ops);
            emit(high, ops);
            ops.push(Op::Between);
        }
        Expr::If(cond, then, otherwise) => {
            emit(cond, ops);
            let to_else = ops.len();
            ops.push(Op::JumpIfFalse(0));
            emit(then, ops);
            let to_end = ops.len();
            ops.push(Op::Jump(0));
            ops[to_else] = Op::JumpIfFalse(ops.len() as u32);
            emit(otherwise, ops);
            ops[to_end] = Op::Jump(ops.len() as u32);
        }
    }
}

impl Program {
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Runs the program on one row; `stack` is scratch space reused across rows.
    pub fn eval(&self, row: &[i64], stack: &mut Vec<i64>) -> i64 {
        stack.clear();
        let mut pc = 0;
        while let Some(op) = self.ops.get(pc) {
            pc += 1;
            match *op {
                Op::Col(c) => stack.push(row[c as usize]),
                Op::Lit(v) => stack.push(v),
                Op::Not => {
                    let v = stack.pop().unwrap_or(0);
                    stack.push((v == 0) as i64);
                }
                Op::Neg => {
                    let v = stack.pop().unwrap_or(0);
                    stack.push(v.wrapping_neg());
                }
                Op::Abs => {
                    let v = stack.pop().unwrap_or(0);
                    stack.push(v.wrapping_abs());
                }
                Op::Bool => {
                    let v = stack.pop().unwrap_or(0);
                    stack.push((v != 0) as i64);
                }
                Op::Between => {
                    let high = stack.pop().unwrap_or(0);
                    let low = stack.pop().unwrap_or(0);
                    let x = stack.pop().unwrap_or(0);
                    stack.push((low <= x && x <= high) as i64);
                }
                Op::JumpIfFalse(target) => {
                    if stack.pop().unwrap_or(0) == 0 {
                        pc = target as usize;
                    }
                }
                Op::JumpIfFalseOrPop(target) => {
                    if stack.last().copied().unwrap_or(0) == 0 {
                        pc = target as usize;
                    } else {
                        stack.pop();
                    }
                }
                Op::JumpIfTrueOrPop(target) => {
                    if stack.last().copied().unwrap_or(0) != 0 {
                        stack.pop();
                        stack.push(1);
                        pc = target as usize;
                    } else {
                        stack.pop();
                    }
                }
                Op::Jump(target) => pc = target as usize,
                binary => {
                    let b = stack.pop().unwrap_or(0);
                    let a = stack.pop().unwrap_or(0);
                    stack.push(match binary {
                        Op::Add => a.wrapping_add(b),
                        Op::Sub => a.wrapping_sub(b),
                        Op::Mul => a.wrapping_mul(b),
                        Op::Div => a.checked_div(b).unwrap_or(0),
                        Op::Rem => a.checked_rem(b).unwrap_or(0),
                        Op::Lt => (a < b) as i64,
                        Op::Le => (a <= b) as i64,
                        Op::Gt => (a > b) as i64,
                        Op::Ge => (a >= b) as i64,
                        Op::Eq => (a == b) as i64,
                        Op::Ne => (a != b) as i64,
                        Op::Min => a.min(b),
                        Op::Max => a.max(b),
                        _ => unreachable!("unary and jump ops are handled above"),
                    });
                }
            }
        }
        stack.pop().unwrap_or(0)
    }
}
